package v1alpha1

// The Node condition through which the VM agent says how this node runs
// VMs: under KVM, or under QEMU's TCG (software emulation) and why.
// Written by the VM agent (converge-node vm, nodeplane/vm/kvmprobe and
// nodeplane/vm/agent) when it registers its Node, from the KVM probe it
// runs at start (or from --domain-type when that is given). Read by
// people (kubectl describe node) and by whatever places or refuses VMs by
// acceleration; the scheduler does not read it yet.
const (
	// KVMCondition is the Node condition type. Status True: the agent
	// runs domains of type kvm; False: type qemu (TCG); the message says
	// why, naming the facts that decided (the /dev/kvm device, the CPU's
	// vmx/svm flags, the kvm module behind /dev/kvm, the probe guest).
	KVMCondition = "converge.dev/KVM"

	// KVMReasonGuestRan (True): a probe guest went through real,
	// protected and long mode and took timer interrupts under /dev/kvm,
	// on a CPU with vmx or svm and a kvm_intel or kvm_amd module.
	KVMReasonGuestRan = "KVMGuestRan"
	// KVMReasonDeviceMissing (False): there is no /dev/kvm.
	KVMReasonDeviceMissing = "KVMDeviceMissing"
	// KVMReasonPVM (False): /dev/kvm is backed by kvm_pvm (Pagetable-based
	// Virtual Machine), which runs only PVM-enabled guest kernels; normal
	// guests hang under it.
	KVMReasonPVM = "KVMIsPVM"
	// KVMReasonNoHardwareVirtualization (False): the CPU has neither the
	// vmx nor the svm flag.
	KVMReasonNoHardwareVirtualization = "NoHardwareVirtualization"
	// KVMReasonGuestFailed (False): the static facts allow KVM but the
	// probe guest did not complete under it (QEMU failed, or it hung and
	// was killed).
	KVMReasonGuestFailed = "KVMGuestFailed"
	// KVMReasonDomainTypeSet: converge-node vm --domain-type chose the
	// domain type; nothing was probed.
	KVMReasonDomainTypeSet = "DomainTypeSet"
)
