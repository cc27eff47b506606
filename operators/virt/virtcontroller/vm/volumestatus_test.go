package vm_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	vmcontroller "github.com/converge-dev/converge/operators/virt/virtcontroller/vm"
)

// TestVolumeStatusOf reads a template's volumes as KubeVirt's
// HasDataVolumeErrors, HasDataVolumeProvisioning and HasUnboundPVC.
func TestVolumeStatusOf(t *testing.T) {
	dvVol := kubevirtv1.Volume{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "root"}}}
	pvcVol := kubevirtv1.Volume{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	dv := func(phase cdiv1.DataVolumePhase, conds ...cdiv1.DataVolumeCondition) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Status: cdiv1.DataVolumeStatus{Phase: phase, Conditions: conds}}
	}
	running := func(reason, msg string) cdiv1.DataVolumeCondition {
		return cdiv1.DataVolumeCondition{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
	}
	bound := cdiv1.DataVolumeCondition{Type: cdiv1.DataVolumeBound, Status: corev1.ConditionTrue}
	claim := func(phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
	}
	tests := []struct {
		name  string
		vols  []kubevirtv1.Volume
		dv    *cdiv1.DataVolume
		claim *corev1.PersistentVolumeClaim
		want  vmcontroller.VolumeStatus
	}{
		{"no DataVolume yet", []kubevirtv1.Volume{dvVol}, nil, nil, vmcontroller.VolumeStatus{}},
		{"just created", []kubevirtv1.Volume{dvVol}, dv(""), nil, vmcontroller.VolumeStatus{Provisioning: true}},
		{"importing, claim bound", []kubevirtv1.Volume{dvVol}, dv(cdiv1.ImportInProgress, bound), claim(corev1.ClaimBound), vmcontroller.VolumeStatus{Provisioning: true}},
		{"WaitForFirstConsumer, unbound", []kubevirtv1.Volume{dvVol}, dv(cdiv1.WaitForFirstConsumer), claim(corev1.ClaimPending), vmcontroller.VolumeStatus{UnboundClaim: true}},
		{"Succeeded", []kubevirtv1.Volume{dvVol}, dv(cdiv1.Succeeded, bound, running("Completed", "Import Complete")), claim(corev1.ClaimBound), vmcontroller.VolumeStatus{}},
		{"Failed", []kubevirtv1.Volume{dvVol}, dv(cdiv1.Failed), nil, vmcontroller.VolumeStatus{DataVolumeError: "DataVolume root is in Failed phase", Provisioning: true}},
		{"CDI's importer Error", []kubevirtv1.Volume{dvVol}, dv(cdiv1.ImportInProgress, running("Error", "exit 1")), nil,
			vmcontroller.VolumeStatus{DataVolumeError: "DataVolume root importer has stopped running due to an error: exit 1", Provisioning: true}},
		{"converge's agent failed an attempt", []kubevirtv1.Volume{dvVol}, dv(cdiv1.ImportInProgress, running("HTTPError", "404")), nil,
			vmcontroller.VolumeStatus{DataVolumeError: "DataVolume root importer has stopped running due to an error: 404", Provisioning: true}},
		{"no importer node is no error", []kubevirtv1.Volume{dvVol}, dv(cdiv1.WaitForFirstConsumer, running("NoImporterNode", "no node")), claim(corev1.ClaimPending),
			vmcontroller.VolumeStatus{UnboundClaim: true}},
		{"an unbound plain PVC", []kubevirtv1.Volume{pvcVol}, nil, claim(corev1.ClaimPending), vmcontroller.VolumeStatus{UnboundClaim: true}},
		{"a missing plain PVC", []kubevirtv1.Volume{pvcVol}, nil, nil, vmcontroller.VolumeStatus{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := vmcontroller.VolumeStatusOf(tt.vols,
				func(string) *cdiv1.DataVolume { return tt.dv },
				func(string) *corev1.PersistentVolumeClaim { return tt.claim })
			if got != tt.want {
				t.Errorf("VolumeStatusOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestPrintableStatusWithVolumes checks KubeVirt's precedence of the
// volume statuses among the others.
func TestPrintableStatusWithVolumes(t *testing.T) {
	rs := func(s kubevirtv1.VirtualMachineRunStrategy) *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &s}}
	}
	vmi := func(phase kubevirtv1.VirtualMachineInstancePhase, conds ...kubevirtv1.VirtualMachineInstanceCondition) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase, Conditions: conds}}
	}
	unsched := kubevirtv1.VirtualMachineInstanceCondition{Type: "PodScheduled", Status: corev1.ConditionFalse, Reason: "Unschedulable"}
	pvcMissing := kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse, Reason: "FailedPvcNotFound"}
	dvErr := vmcontroller.VolumeStatus{DataVolumeError: "DataVolume root is in Failed phase"}
	uid := types.UID("u1")
	manualStop := rs(kubevirtv1.RunStrategyManual)
	manualStop.Status.StateChangeRequests = []kubevirtv1.VirtualMachineStateChangeRequest{{Action: kubevirtv1.StopRequest, UID: &uid}}
	manualStart := rs(kubevirtv1.RunStrategyManual)
	manualStart.Status.StateChangeRequests = []kubevirtv1.VirtualMachineStateChangeRequest{{Action: kubevirtv1.StartRequest}}
	tests := []struct {
		name string
		vm   *kubevirtv1.VirtualMachine
		vmi  *kubevirtv1.VirtualMachineInstance
		vols vmcontroller.VolumeStatus
		want kubevirtv1.VirtualMachinePrintableStatus
	}{
		{"running wins over a DataVolume error", rs(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Running), dvErr, kubevirtv1.VirtualMachineStatusRunning},
		{"no VMI, provisioning", rs(kubevirtv1.RunStrategyAlways), nil, vmcontroller.VolumeStatus{Provisioning: true}, kubevirtv1.VirtualMachineStatusProvisioning},
		{"Halted, provisioning", rs(kubevirtv1.RunStrategyHalted), nil, vmcontroller.VolumeStatus{Provisioning: true}, kubevirtv1.VirtualMachineStatusProvisioning},
		{"no VMI, DataVolume error", rs(kubevirtv1.RunStrategyAlways), nil, dvErr, kubevirtv1.VirtualMachineStatusDataVolumeError},
		{"DataVolume error over Unschedulable", rs(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Pending, unsched), dvErr, kubevirtv1.VirtualMachineStatusDataVolumeError},
		{"Unschedulable over Provisioning", rs(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Pending, unsched), vmcontroller.VolumeStatus{Provisioning: true}, kubevirtv1.VirtualMachineStatusUnschedulable},
		{"PVC not found first", rs(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Pending, pvcMissing, unsched), dvErr, kubevirtv1.VirtualMachineStatusPvcNotFound},
		{"unbound claim, Always", rs(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Pending), vmcontroller.VolumeStatus{UnboundClaim: true}, kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding},
		{"unbound claim, Halted", rs(kubevirtv1.RunStrategyHalted), nil, vmcontroller.VolumeStatus{UnboundClaim: true}, kubevirtv1.VirtualMachineStatusStopped},
		{"unbound claim, Manual with a start request", manualStart, nil, vmcontroller.VolumeStatus{UnboundClaim: true}, kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding},
		{"unbound claim, Manual stopping its VMI", manualStop, vmi(kubevirtv1.Pending), vmcontroller.VolumeStatus{UnboundClaim: true}, kubevirtv1.VirtualMachineStatusStarting},
		{"volumes fine: Starting", rs(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Scheduled), vmcontroller.VolumeStatus{}, kubevirtv1.VirtualMachineStatusStarting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := vmcontroller.PrintableStatusWithVolumes(tt.vm, tt.vmi, tt.vols); got != tt.want {
				t.Errorf("PrintableStatusWithVolumes = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestNewDataVolume: the DataVolume of a template, as KubeVirt's
// CreateDataVolumeManifest; a template in another namespace is refused.
func TestNewDataVolume(t *testing.T) {
	vm := dvVM("web", dvTemplate("web-root", "http://images.local/root.img"))
	vm.UID = "vm-uid"
	vm.Spec.DataVolumeTemplates[0].Annotations = map[string]string{"a": "b"}
	dv, err := vmcontroller.NewDataVolume(vm, 0)
	if err != nil {
		t.Fatal(err)
	}
	if dv.Namespace != vm.Namespace || dv.Name != "web-root" || dv.Labels["disk"] != "web-root" || dv.Labels[kubevirtv1.CreatedByLabel] != "vm-uid" ||
		dv.Annotations["a"] != "b" || dv.Annotations[vmcontroller.AllowClaimAdoptionAnnotation] != "true" || !metav1.IsControlledBy(dv, vm) {
		t.Errorf("NewDataVolume = %+v", dv.ObjectMeta)
	}
	if vm.Spec.DataVolumeTemplates[0].Labels[kubevirtv1.CreatedByLabel] != "" {
		t.Error("NewDataVolume changed the template's labels")
	}
	vm.Spec.DataVolumeTemplates[0].Namespace = "elsewhere"
	if _, err := vmcontroller.NewDataVolume(vm, 0); err == nil || err.Error() != `spec.dataVolumeTemplates[0].metadata.namespace "elsewhere": a VirtualMachine's DataVolumes live in its namespace "vms"` {
		t.Errorf("NewDataVolume in another namespace: %v", err)
	}
}
