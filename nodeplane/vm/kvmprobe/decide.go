package kvmprobe

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// Domain types Decide chooses between (libvirt's <domain type>).
const (
	DomainTypeKVM  = "kvm"
	DomainTypeQEMU = "qemu" // TCG
)

// What decided, in Result.DecidedBy.
const (
	ByDevice     = "device"      // /dev/kvm
	ByCPUFlags   = "cpu-flags"   // vmx/svm in /proc/cpuinfo
	ByKVMModule  = "kvm-module"  // the module behind /dev/kvm
	ByProbeGuest = "probe-guest" // RunGuest
)

// Result is the decision: the domain type, the reason (one of
// v1alpha1.KVMReason…), a message giving every fact that counted, and
// which facts decided.
type Result struct {
	DomainType string
	Reason     string
	Message    string
	DecidedBy  []string
	Facts      Facts
	Guest      Guest
}

// Decide takes the static facts and the probe guest's run and gives the
// domain type: qemu (TCG) when there is no KVM device, when kvm_pvm backs
// it without kvm_intel or kvm_amd, when the CPU has neither vmx nor svm,
// or when the guest did not complete; kvm only when none of these holds.
// DecidedBy lists every fact that alone would have chosen TCG, in that
// order, or, for kvm, the facts that allowed it.
func Decide(f Facts, g Guest) Result {
	r := Result{Facts: f, Guest: g, DomainType: DomainTypeQEMU}
	if !f.Device {
		r.Reason, r.DecidedBy = v1alpha1.KVMReasonDeviceMissing, []string{ByDevice}
		r.Message = "VMs run under TCG (software emulation): no KVM device (" + f.DeviceDetail + "); the kvm modules are not loaded or the device is not in the container"
		return r
	}
	var why []string
	pvm := f.ModulesKnown && f.HasModule("kvm_pvm") && !f.HasModule("kvm_intel") && !f.HasModule("kvm_amd")
	if pvm {
		r.DecidedBy = append(r.DecidedBy, ByKVMModule)
		why = append(why, "/dev/kvm is backed by kvm_pvm (Pagetable-based Virtual Machine), which runs only PVM-enabled guest kernels: normal guests hang")
	}
	noHW := f.FlagsKnown && !f.VMX && !f.SVM
	if noHW {
		r.DecidedBy = append(r.DecidedBy, ByCPUFlags)
		flag := "the CPU has no vmx or svm flag"
		if f.Hypervisor {
			flag += " (it is itself a guest: flag hypervisor; nested virtualization is not offered)"
		}
		why = append(why, flag)
	}
	if !g.OK {
		r.DecidedBy = append(r.DecidedBy, ByProbeGuest)
		why = append(why, g.Problem)
	}
	switch {
	case pvm:
		r.Reason = v1alpha1.KVMReasonPVM
	case noHW:
		r.Reason = v1alpha1.KVMReasonNoHardwareVirtualization
	case !g.OK:
		r.Reason = v1alpha1.KVMReasonGuestFailed
	}
	if r.Reason != "" {
		if g.OK {
			why = append(why, fmt.Sprintf("a probe guest did run (%s in %s), but a normal kernel needs more than it does", g.Stages, g.Elapsed.Round(time.Millisecond)))
		}
		r.Message = "VMs run under TCG (software emulation): " + strings.Join(why, "; ")
		return r
	}
	r.DomainType, r.Reason = DomainTypeKVM, v1alpha1.KVMReasonGuestRan
	r.DecidedBy = []string{ByDevice}
	var allowed []string
	if f.FlagsKnown {
		r.DecidedBy = append(r.DecidedBy, ByCPUFlags)
		allowed = append(allowed, "CPU flag "+map[bool]string{true: "vmx", false: "svm"}[f.VMX])
	}
	if f.ModulesKnown {
		r.DecidedBy = append(r.DecidedBy, ByKVMModule)
		for _, m := range []string{"kvm_intel", "kvm_amd"} {
			if f.HasModule(m) {
				allowed = append(allowed, "module "+m)
			}
		}
	}
	r.DecidedBy = append(r.DecidedBy, ByProbeGuest)
	r.Message = fmt.Sprintf("VMs run under KVM: a probe guest went through real, protected and long mode and took timer interrupts under /dev/kvm in %s", g.Elapsed.Round(time.Millisecond))
	if len(allowed) > 0 {
		r.Message += " (" + strings.Join(allowed, ", ") + ")"
	}
	return r
}

// Condition gives the Node condition v1alpha1.KVMCondition for r: True
// for kvm, False for TCG, with r's reason and message, both times now.
func (r Result) Condition(now time.Time) corev1.NodeCondition {
	status := corev1.ConditionFalse
	if r.DomainType == DomainTypeKVM {
		status = corev1.ConditionTrue
	}
	t := metav1.NewTime(now)
	return corev1.NodeCondition{Type: v1alpha1.KVMCondition, Status: status, Reason: r.Reason, Message: r.Message, LastHeartbeatTime: t, LastTransitionTime: t}
}

// Chosen gives the Result of a domain type chosen by the operator
// (converge-node vm --domain-type): nothing probed.
func Chosen(domainType string) Result {
	return Result{DomainType: domainType, Reason: v1alpha1.KVMReasonDomainTypeSet,
		Message: fmt.Sprintf("domain type %s set by --domain-type: KVM was not probed", domainType)}
}
