// Package kvmprobe decides whether this node runs VMs under KVM or under
// QEMU's TCG, for the VM agent (converge-node vm without --domain-type):
// Probe reads the static facts (ReadFacts: is /dev/kvm a device, does the
// CPU have the vmx or svm flag, which kvm module is loaded: kvm_intel,
// kvm_amd or kvm_pvm) and runs a probe guest under /dev/kvm (RunGuest: a
// 64 KiB firmware image, testdata/probe-rom.S, going through real mode,
// protected mode, timer interrupts and long mode in a QEMU child process
// that is killed at a timeout), then Decide gives the domain type with a
// reason and a message naming the facts that decided. KVM is chosen only
// when every fact allows it and the guest completed.
//
// Device presence is not enough: on the machines this project runs on,
// /dev/kvm is kvm_pvm (nested PVM, no vmx/svm flag), which only runs
// PVM-enabled guest kernels; a Debian kernel hangs under it, libvirt
// still advertises type kvm, and the probe guest stops after protected
// mode, never receiving a timer interrupt. A trivial guest (a few
// instructions in real mode, even the switch to long mode) does run
// there, which is why the probe goes as far as interrupts and why the
// static facts take part in the decision.
//
// How this relates to KubeVirt: virt-handler's device manager advertises
// the extended resource devices.kubevirt.io/kvm on a node whenever
// /dev/kvm exists there (pkg/virt-handler/device-manager), and
// virt-launcher requests it unless the cluster sets
// spec.configuration.developerConfiguration.useEmulation, in which case
// every VM of the cluster runs under TCG; nothing checks that a guest
// runs. converge has no device plugin: the agent decides per node from
// this probe, falls back to TCG by itself, and publishes the decision as
// the Node condition v1alpha1.KVMCondition.
package kvmprobe
