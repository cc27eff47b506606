package scheduler_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

// hostpathPV is a PersistentVolume of the hostpath CSI driver on node, as
// its provisioner makes it (required node affinity on
// v1alpha1.HostpathTopologyKey).
func hostpathPV(name, node string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.HostpathTopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}}
}

// csiNode is an agent node the kubelet labelled with the hostpath CSI
// driver's topology (its CSI registration).
func csiNode(name string) corev1.Node {
	return virttest.Node(name, "4", "8Gi", map[string]string{v1alpha1.HostpathTopologyKey: name})
}

func pvc(name, volumeName string, ann map[string]string) *corev1.PersistentVolumeClaim {
	class := "hostpath-csi-local"
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: virttest.Namespace, Name: name, Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volumeName, StorageClassName: &class}}
}

func class(mode storagev1.VolumeBindingMode, topo ...corev1.TopologySelectorTerm) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-csi-local"}, VolumeBindingMode: &mode, AllowedTopologies: topo}
}

// TestScheduleWithClaims: the volume part of the decision table, as
// kube-scheduler's VolumeBinding filter decides for a pod.
func TestScheduleWithClaims(t *testing.T) {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	nodes := []corev1.Node{csiNode("a"), csiNode("b"), csiNode("c")}
	tests := []struct {
		name    string
		claims  scheduler.Claims
		nodes   []corev1.Node
		want    string
		wantMsg string
	}{
		{"no claims: the emptiest node", nil, nodes, "a", ""},
		{"bound on b: b though a is as empty", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "pv-1", nil), PV: hostpathPV("pv-1", "b"), Class: class(wffc)}}, nodes, "b", ""},
		{"bound by hostname affinity", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "pv-1", nil), PV: func() *corev1.PersistentVolume {
			pv := hostpathPV("pv-1", "c")
			pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Key = corev1.LabelHostname
			return pv
		}()}}, []corev1.Node{
			virttest.Node("a", "4", "8Gi", map[string]string{corev1.LabelHostname: "a"}),
			virttest.Node("c", "4", "8Gi", map[string]string{corev1.LabelHostname: "c"})}, "c", ""},
		{"a PV without node affinity goes anywhere", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "pv-1", nil), PV: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}}}}, nodes, "a", ""},
		{"bound on a node without the agent", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "pv-1", nil), PV: hostpathPV("pv-1", "z")}}, nodes, "",
			"0/3 nodes are available: 3 node(s) had volume node affinity conflict (PersistentVolumeClaim disk on PersistentVolume pv-1)."},
		{"two claims on two nodes", scheduler.Claims{
			{Name: "root", PVC: pvc("root", "pv-1", nil), PV: hostpathPV("pv-1", "a")},
			{Name: "data", PVC: pvc("data", "pv-2", nil), PV: hostpathPV("pv-2", "b")}}, nodes, "",
			"0/3 nodes are available: 1 node(s) had volume node affinity conflict (PersistentVolumeClaim data on PersistentVolume pv-2), 2 node(s) had volume node affinity conflict (PersistentVolumeClaim root on PersistentVolume pv-1)."},
		{"bound to a PV that is gone", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "pv-1", nil)}}, nodes[:1], "",
			"0/1 nodes are available: 1 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s) (PersistentVolumeClaim disk)."},
		{"resources are checked first", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "pv-1", nil), PV: hostpathPV("pv-1", "small")}},
			[]corev1.Node{virttest.Node("small", "1", "512Mi", map[string]string{v1alpha1.HostpathTopologyKey: "small"}), csiNode("b")}, "",
			"0/2 nodes are available: 1 Insufficient memory, 1 node(s) had volume node affinity conflict (PersistentVolumeClaim disk on PersistentVolume pv-1)."},
		{"unbound immediate claim", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "", nil), Class: class(immediate)}}, nodes, "",
			"0/3 nodes are available: VMI has unbound immediate PersistentVolumeClaims (disk)."},
		{"unbound claim without a StorageClass is immediate", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "", nil)}}, nodes, "",
			"0/3 nodes are available: VMI has unbound immediate PersistentVolumeClaims (disk)."},
		{"unbound WaitForFirstConsumer: any node", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "", nil), Class: class(wffc)}}, nodes, "a", ""},
		{"unbound WaitForFirstConsumer with a selected node", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "", map[string]string{scheduler.AnnSelectedNode: "c"}), Class: class(wffc)}}, nodes, "c", ""},
		{"selected node not an agent node", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "", map[string]string{scheduler.AnnSelectedNode: "z"}), Class: class(wffc)}}, nodes[:2], "",
			"0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind (PersistentVolumeClaim disk is provisioned on node z)."},
		{"allowedTopologies", scheduler.Claims{{Name: "disk", PVC: pvc("disk", "", nil), Class: class(wffc, corev1.TopologySelectorTerm{
			MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: v1alpha1.HostpathTopologyKey, Values: []string{"b"}}}})}}, nodes, "b", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := virttest.VMISpec("1Gi", nil)
			d := scheduler.ScheduleWithClaims(vmi, scheduler.Requests(vmi, nil), tt.nodes, nil, tt.claims)
			if d.Node != tt.want || d.Message != tt.wantMsg {
				t.Errorf("ScheduleWithClaims = %+v, want node %q message %q", d, tt.want, tt.wantMsg)
			}
		})
	}
}

// TestWaitForVolumes: what a VMI waits for before any node is considered,
// as KubeVirt's VMI controller delays the virt-launcher pod.
func TestWaitForVolumes(t *testing.T) {
	yes := true
	dvOwned := func(name string) *corev1.PersistentVolumeClaim {
		p := pvc(name, "pv-1", nil)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: name, Controller: &yes}}
		return p
	}
	dv := func(name string, phase cdiv1.DataVolumePhase) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: cdiv1.DataVolumeStatus{Phase: phase}}
	}
	tests := []struct {
		name       string
		claims     []scheduler.Claim
		wantType   kubevirtv1.VirtualMachineInstanceConditionType
		wantReason string
		wantMsg    string
	}{
		{"no claims", nil, "", "", ""},
		{"a plain bound PVC", []scheduler.Claim{{Name: "disk", PVC: pvc("disk", "pv-1", nil)}}, "", "", ""},
		{"missing PVC", []scheduler.Claim{{Name: "disk"}}, kubevirtv1.VirtualMachineInstanceSynchronized, "FailedPvcNotFound", "PVC vms/disk does not exist, waiting for it to appear"},
		{"a DataVolume importing", []scheduler.Claim{{Name: "disk", PVC: dvOwned("disk"), DataVolume: dv("disk", cdiv1.ImportInProgress)}},
			kubevirtv1.VirtualMachineInstanceDataVolumesReady, "NotAllDVsReady", "Not all of the VMI's DVs are ready"},
		{"a DataVolume waiting for its first consumer", []scheduler.Claim{{Name: "disk", PVC: dvOwned("disk"), DataVolume: dv("disk", cdiv1.WaitForFirstConsumer)}},
			kubevirtv1.VirtualMachineInstanceDataVolumesReady, "NotAllDVsReady", "Not all of the VMI's DVs are ready"},
		{"the controlling DataVolume is gone", []scheduler.Claim{{Name: "disk", PVC: dvOwned("disk")}},
			kubevirtv1.VirtualMachineInstanceDataVolumesReady, "NotAllDVsReady", "Not all of the VMI's DVs are ready"},
		{"a DataVolume Succeeded", []scheduler.Claim{{Name: "disk", PVC: dvOwned("disk"), DataVolume: dv("disk", cdiv1.Succeeded)}}, "", "", ""},
		{"a missing PVC is said first", []scheduler.Claim{{Name: "root", PVC: dvOwned("root"), DataVolume: dv("root", cdiv1.ImportInProgress)}, {Name: "data"}},
			kubevirtv1.VirtualMachineInstanceSynchronized, "FailedPvcNotFound", "PVC vms/data does not exist, waiting for it to appear"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := scheduler.WaitForVolumes(virttest.Namespace, tt.claims)
			if tt.wantType == "" {
				if w != nil {
					t.Fatalf("WaitForVolumes = %+v, want nil", w.Condition)
				}
				return
			}
			if w == nil {
				t.Fatalf("WaitForVolumes = nil, want %s", tt.wantType)
			}
			if c := w.Condition; c.Type != tt.wantType || c.Status != corev1.ConditionFalse || c.Reason != tt.wantReason || c.Message != tt.wantMsg {
				t.Errorf("WaitForVolumes = %+v, want %s=False %s %q", c, tt.wantType, tt.wantReason, tt.wantMsg)
			}
		})
	}
}

// TestDataVolumesReady aggregates the DataVolumes' Ready conditions as
// KubeVirt's aggregateDataVolumesConditions.
func TestDataVolumesReady(t *testing.T) {
	dv := func(st corev1.ConditionStatus) *cdiv1.DataVolume {
		d := &cdiv1.DataVolume{}
		if st != "" {
			d.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeReady, Status: st}}
		}
		return d
	}
	tests := []struct {
		name       string
		claims     []scheduler.Claim
		wantOK     bool
		wantStatus corev1.ConditionStatus
		wantReason string
	}{
		{"no dataVolume volume", []scheduler.Claim{{Name: "disk", DataVolume: dv(corev1.ConditionFalse)}}, false, "", ""},
		{"all Ready", []scheduler.Claim{{FromDataVolume: true, DataVolume: dv(corev1.ConditionTrue)}, {FromDataVolume: true, DataVolume: dv(corev1.ConditionTrue)}}, true, corev1.ConditionTrue, "AllDVsReady"},
		{"one without Ready", []scheduler.Claim{{FromDataVolume: true, DataVolume: dv(corev1.ConditionTrue)}, {FromDataVolume: true, DataVolume: dv("")}}, true, corev1.ConditionUnknown, "NotAllDVsReady"},
		{"False wins over Unknown", []scheduler.Claim{{FromDataVolume: true, DataVolume: dv("")}, {FromDataVolume: true, DataVolume: dv(corev1.ConditionFalse)}}, true, corev1.ConditionFalse, "NotAllDVsReady"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := scheduler.DataVolumesReady(tt.claims)
			if ok != tt.wantOK || (ok && (c.Status != tt.wantStatus || c.Reason != tt.wantReason)) {
				t.Errorf("DataVolumesReady = %+v, %v; want %v %s %s", c, ok, tt.wantOK, tt.wantStatus, tt.wantReason)
			}
		})
	}
}
