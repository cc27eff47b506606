package kvmprobe

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

var (
	pvmHost   = Facts{Device: true, FlagsKnown: true, Hypervisor: true, ModulesKnown: true, Modules: []string{"kvm", "kvm_pvm"}}
	intelHost = Facts{Device: true, FlagsKnown: true, VMX: true, ModulesKnown: true, Modules: []string{"kvm", "kvm_intel"}}
	amdHost   = Facts{Device: true, FlagsKnown: true, SVM: true, ModulesKnown: true, Modules: []string{"kvm", "kvm_amd"}}
	ran       = Guest{OK: true, Stages: Stages, Elapsed: 120 * time.Millisecond}
	hung      = Guest{Stages: "RP", Elapsed: 10 * time.Second, Problem: "the probe guest reached protected mode but not timer interrupts and hung: killed after 10s"}
	qemuFails = Guest{Problem: "QEMU exited (exit status 1) after the probe guest wrote nothing: Could not access KVM kernel module: Permission denied"}
)

// TestDecide is the decision from the static facts and the probe guest.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name      string
		facts     Facts
		guest     Guest
		typ       string
		reason    string
		decidedBy []string
		message   []string
	}{
		{"no device", Facts{DeviceDetail: "stat /dev/kvm: no such file or directory", FlagsKnown: true, VMX: true}, Guest{},
			DomainTypeQEMU, v1alpha1.KVMReasonDeviceMissing, []string{ByDevice}, []string{"TCG", "no KVM device (stat /dev/kvm: no such file or directory)"}},
		{"this machine: kvm_pvm, no vmx/svm, guest hangs", pvmHost, hung,
			DomainTypeQEMU, v1alpha1.KVMReasonPVM, []string{ByKVMModule, ByCPUFlags, ByProbeGuest},
			[]string{"TCG", "kvm_pvm", "only PVM-enabled guest kernels", "no vmx or svm flag", "flag hypervisor", "hung"}},
		{"kvm_pvm even when the guest runs", pvmHost, ran,
			DomainTypeQEMU, v1alpha1.KVMReasonPVM, []string{ByKVMModule, ByCPUFlags}, []string{"kvm_pvm", "a probe guest did run (RPTL in 120ms)"}},
		{"kvm_pvm beside kvm_intel is not PVM", Facts{Device: true, FlagsKnown: true, VMX: true, ModulesKnown: true, Modules: []string{"kvm", "kvm_intel", "kvm_pvm"}}, ran,
			DomainTypeKVM, v1alpha1.KVMReasonGuestRan, []string{ByDevice, ByCPUFlags, ByKVMModule, ByProbeGuest}, []string{"KVM", "module kvm_intel"}},
		{"intel", intelHost, ran,
			DomainTypeKVM, v1alpha1.KVMReasonGuestRan, []string{ByDevice, ByCPUFlags, ByKVMModule, ByProbeGuest},
			[]string{"VMs run under KVM", "timer interrupts", "in 120ms", "CPU flag vmx, module kvm_intel"}},
		{"amd", amdHost, ran,
			DomainTypeKVM, v1alpha1.KVMReasonGuestRan, []string{ByDevice, ByCPUFlags, ByKVMModule, ByProbeGuest}, []string{"CPU flag svm, module kvm_amd"}},
		{"intel, guest hangs", intelHost, hung,
			DomainTypeQEMU, v1alpha1.KVMReasonGuestFailed, []string{ByProbeGuest}, []string{"TCG", "hung: killed after 10s"}},
		{"intel, QEMU cannot open the device", intelHost, qemuFails,
			DomainTypeQEMU, v1alpha1.KVMReasonGuestFailed, []string{ByProbeGuest}, []string{"Permission denied"}},
		{"no flags, guest runs", Facts{Device: true, FlagsKnown: true, ModulesKnown: true, Modules: []string{"kvm"}}, ran,
			DomainTypeQEMU, v1alpha1.KVMReasonNoHardwareVirtualization, []string{ByCPUFlags}, []string{"no vmx or svm flag"}},
		{"nothing known but the guest", Facts{Device: true}, ran,
			DomainTypeKVM, v1alpha1.KVMReasonGuestRan, []string{ByDevice, ByProbeGuest}, []string{"VMs run under KVM"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Decide(tc.facts, tc.guest)
			if r.DomainType != tc.typ || r.Reason != tc.reason || !slices.Equal(r.DecidedBy, tc.decidedBy) {
				t.Errorf("Decide = %s %s %v, want %s %s %v", r.DomainType, r.Reason, r.DecidedBy, tc.typ, tc.reason, tc.decidedBy)
			}
			for _, m := range tc.message {
				if !strings.Contains(r.Message, m) {
					t.Errorf("message %q does not contain %q", r.Message, m)
				}
			}
		})
	}
}

// TestCondition maps the decision to the Node condition.
func TestCondition(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		r    Result
		want corev1.ConditionStatus
	}{{Decide(intelHost, ran), corev1.ConditionTrue}, {Decide(pvmHost, hung), corev1.ConditionFalse}, {Chosen("qemu"), corev1.ConditionFalse}, {Chosen("kvm"), corev1.ConditionTrue}} {
		c := tc.r.Condition(now)
		if c.Type != v1alpha1.KVMCondition || c.Status != tc.want || c.Reason != tc.r.Reason || c.Message != tc.r.Message || !c.LastTransitionTime.Time.Equal(now) {
			t.Errorf("Condition(%s %s) = %+v, want type %s status %s", tc.r.DomainType, tc.r.Reason, c, v1alpha1.KVMCondition, tc.want)
		}
	}
}

// TestReadFacts reads fixtures: the first flags line of a cpuinfo, the
// kvm modules of a module directory, a device that is or is not one.
func TestReadFacts(t *testing.T) {
	dir := t.TempDir()
	cpuinfo := filepath.Join(dir, "cpuinfo")
	os.WriteFile(cpuinfo, []byte("processor\t: 0\nflags\t\t: fpu vme hypervisor lahf_lm\nprocessor\t: 1\nflags\t\t: vmx\n"), 0o644)
	mods := filepath.Join(dir, "module")
	for _, m := range []string{"kvm", "kvm_pvm", "loop"} {
		os.MkdirAll(filepath.Join(mods, m, "parameters"), 0o755)
	}
	regular := filepath.Join(dir, "kvm")
	os.WriteFile(regular, nil, 0o644)

	f := ReadFacts(Paths{Device: "/dev/null", CPUInfo: cpuinfo, SysModule: mods})
	want := Facts{Device: true, FlagsKnown: true, Hypervisor: true, ModulesKnown: true, Modules: []string{"kvm", "kvm_pvm"}}
	if f.Device != want.Device || f.FlagsKnown != want.FlagsKnown || f.VMX || f.SVM || !f.Hypervisor || !slices.Equal(f.Modules, want.Modules) || !f.ModulesKnown {
		t.Errorf("ReadFacts = %+v, want %+v", f, want)
	}
	f = ReadFacts(Paths{Device: regular, CPUInfo: filepath.Join(dir, "none"), SysModule: filepath.Join(dir, "none")})
	if f.Device || !strings.Contains(f.DeviceDetail, "is not a character device") || f.FlagsKnown || f.ModulesKnown {
		t.Errorf("ReadFacts of a regular file and missing paths = %+v, want no device (not a character device), nothing known", f)
	}
	f = ReadFacts(Paths{Device: filepath.Join(dir, "absent")})
	if f.Device || !strings.Contains(f.DeviceDetail, "no such file") {
		t.Errorf("ReadFacts of a missing device = %+v", f)
	}
}

// TestROMMatchesSource assembles testdata/probe-rom.S with binutils and
// checks that ROM gives exactly its bytes.
func TestROMMatchesSource(t *testing.T) {
	for _, bin := range []string{"as", "objcopy"} {
		_, err := exec.LookPath(bin)
		vmtest.Require(t, err == nil, "%s not found: apt-get install -y binutils", bin)
	}
	dir := t.TempDir()
	obj, bin := filepath.Join(dir, "rom.o"), filepath.Join(dir, "rom.bin")
	for _, args := range [][]string{{"as", "--32", "-o", obj, "testdata/probe-rom.S"}, {"objcopy", "-O", "binary", "-j", ".text", obj, bin}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if got := ROM(); !bytes.Equal(got, want) {
		t.Fatalf("ROM() (%d bytes) differs from testdata/probe-rom.S assembled (%d bytes): regenerate rom.go", len(got), len(want))
	}
}

// TestGuestUnderTCG runs the probe guest under TCG, where every stage
// works: it proves the guest itself, so that a KVM failure is KVM's.
func TestGuestUnderTCG(t *testing.T) {
	o := DefaultGuestOptions()
	_, err := exec.LookPath(o.QEMU)
	vmtest.Require(t, err == nil, "%s not found: apt-get install -y --no-install-recommends qemu-system-x86", o.QEMU)
	o.Accel, o.Dir = "tcg", t.TempDir()
	g := RunGuest(context.Background(), o)
	if !g.OK || g.Stages != Stages {
		t.Fatalf("probe guest under TCG: %+v, want OK with stages %s", g, Stages)
	}
	t.Logf("probe guest under TCG: %s in %s", g.Stages, g.Elapsed.Round(time.Millisecond))
}

// TestRunGuestKillsAHungQEMU runs a stand-in for QEMU that hangs and
// leaves a grandchild: RunGuest returns soon after the timeout, saying
// the guest hung, and nothing of the process group is left.
func TestRunGuestKillsAHungQEMU(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "qemu")
	pidFile := filepath.Join(dir, "grandchild.pid")
	os.WriteFile(fake, []byte("#!/bin/sh\nprintf RP\nsleep 600 &\necho $! > "+pidFile+"\nwait\n"), 0o755)
	o := DefaultGuestOptions()
	o.QEMU, o.Timeout, o.Dir = fake, 500*time.Millisecond, dir
	start := time.Now()
	g := RunGuest(context.Background(), o)
	took := time.Since(start)
	if g.OK || g.Stages != "RP" || !strings.Contains(g.Problem, "reached protected mode but not timer interrupts") || !strings.Contains(g.Problem, "hung: killed after 500ms") {
		t.Errorf("RunGuest of a hanging QEMU = %+v", g)
	}
	if took > 5*time.Second {
		t.Errorf("RunGuest took %s with a 500ms timeout", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join("/proc", strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := os.ReadFile(filepath.Join(proc, "stat"))
		if err != nil || bytes.Contains(st, []byte(") Z")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in's grandchild %s still runs: the process group was not killed", proc)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "kvmprobe-*")); len(entries) != 0 {
		t.Errorf("firmware directory left: %v", entries)
	}
}

// TestProbeOnThisNode runs the real probe. On a node without /dev/kvm it
// must choose TCG for that reason (some of this project's machines have
// the kvm_pvm module but no device); on the machines with /dev/kvm backed
// by kvm_pvm (no vmx/svm flag) TCG, the reason naming kvm_pvm and the
// missing flags, with the probe guest hung after protected mode and
// killed; elsewhere the choice must follow the guest.
func TestProbeOnThisNode(t *testing.T) {
	o := DefaultOptions()
	_, err := exec.LookPath(o.Guest.QEMU)
	vmtest.Require(t, err == nil, "%s not found: apt-get install -y --no-install-recommends qemu-system-x86", o.Guest.QEMU)
	o.Guest.Timeout, o.Guest.Dir = 5*time.Second, t.TempDir()
	start := time.Now()
	r := Probe(context.Background(), o)
	took := time.Since(start)
	t.Logf("probe (%s): %s %s decided by %v\n  %s\n  facts %+v\n  guest %+v", took.Round(time.Millisecond), r.DomainType, r.Reason, r.DecidedBy, r.Message, r.Facts, r.Guest)
	if took > o.Guest.Timeout+6*time.Second {
		t.Errorf("Probe took %s with a %s guest timeout", took, o.Guest.Timeout)
	}
	switch {
	case !r.Facts.Device:
		if r.DomainType != DomainTypeQEMU || r.Reason != v1alpha1.KVMReasonDeviceMissing {
			t.Errorf("no /dev/kvm: %s %s", r.DomainType, r.Reason)
		}
	case r.Facts.HasModule("kvm_pvm") && !r.Facts.HasModule("kvm_intel") && !r.Facts.HasModule("kvm_amd"):
		if r.DomainType != DomainTypeQEMU || r.Reason != v1alpha1.KVMReasonPVM {
			t.Errorf("kvm_pvm node: %s %s, want qemu %s", r.DomainType, r.Reason, v1alpha1.KVMReasonPVM)
		}
		for _, m := range []string{"kvm_pvm", "no vmx or svm flag"} {
			if !strings.Contains(r.Message, m) {
				t.Errorf("message %q does not name %q", r.Message, m)
			}
		}
		if r.Guest.OK || r.Guest.Stages != "RP" || !slices.Contains(r.DecidedBy, ByProbeGuest) {
			t.Errorf("probe guest under kvm_pvm: %+v (decided by %v), want it stopped after RP and counted", r.Guest, r.DecidedBy)
		}
	default:
		if (r.DomainType == DomainTypeKVM) != r.Guest.OK {
			t.Errorf("domain type %s with the probe guest %+v", r.DomainType, r.Guest)
		}
	}
}
