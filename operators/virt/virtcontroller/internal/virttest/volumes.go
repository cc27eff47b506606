package virttest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// HostpathClass is the StorageClass name of the claims the helpers make
// (the hostpath CSI driver's for a pool named local).
const HostpathClass = "hostpath-csi-local"

// PV gives the PersistentVolume name of the hostpath CSI driver on node,
// as its provisioner makes it: 1Gi, ReadWriteOnce, the driver's CSI source
// and a required node affinity on v1alpha1.HostpathTopologyKey=node.
func PV(name, node string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: HostpathClass,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "kubevirt.io.hostpath-provisioner", VolumeHandle: name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.HostpathTopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}},
		},
	}
}

// PVC gives the claim name in Namespace, 1Gi ReadWriteOnce of
// HostpathClass, unbound.
func PVC(name string) *corev1.PersistentVolumeClaim {
	class := HostpathClass
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// Bind does what the provisioner and the PV controller do for the
// existing claim name: it creates the PersistentVolume "pv-<name>" on
// node (PV), bound to the claim, and binds the claim to it (spec.volumeName,
// status Bound), retrying on conflicts with the controllers.
func (e *Env) Bind(t *testing.T, name, node string) {
	t.Helper()
	ctx := context.Background()
	claim := &corev1.PersistentVolumeClaim{}
	key := types.NamespacedName{Namespace: e.NS, Name: name}
	if err := e.C.Get(ctx, key, claim); err != nil {
		t.Fatalf("PersistentVolumeClaim %s: %v", name, err)
	}
	pv := PV("pv-"+name, node)
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: e.NS, Name: name, UID: claim.UID}
	if err := e.C.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.C.Get(ctx, key, claim); err != nil {
			return err
		}
		claim.Spec.VolumeName = pv.Name
		if err := e.C.Update(ctx, claim); err != nil {
			return err
		}
		claim.Status.Phase = corev1.ClaimBound
		return e.C.Status().Update(ctx, claim)
	}); err != nil {
		t.Fatalf("binding PersistentVolumeClaim %s: %v", name, err)
	}
}

// CreateBound creates the claim name (PVC) already bound to a volume on
// node (Bind).
func (e *Env) CreateBound(t *testing.T, name, node string) {
	t.Helper()
	if err := e.C.Create(context.Background(), PVC(name)); err != nil {
		t.Fatal(err)
	}
	e.Bind(t, name, node)
}

// DataVolumeDone does what converge's DataVolume controller and the
// cdi-importer agent do for the existing DataVolume name: its claim
// (same name, controlled by it) bound to a volume on node (Bind), and the
// DataVolume Succeeded with Bound, Running (Completed) and Ready
// conditions.
func (e *Env) DataVolumeDone(t *testing.T, name, node string) {
	t.Helper()
	ctx := context.Background()
	dv := &cdiv1.DataVolume{}
	if err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: name}, dv); err != nil {
		t.Fatalf("DataVolume %s: %v", name, err)
	}
	claim := PVC(name)
	yes := true
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume", Name: name, UID: dv.UID, Controller: &yes}}
	if err := e.C.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	e.Bind(t, name, node)
	e.SetDataVolumeStatus(t, name, cdiv1.DataVolumeStatus{Phase: cdiv1.Succeeded, ClaimName: name, Progress: "100.0%",
		Conditions: []cdiv1.DataVolumeCondition{
			{Type: cdiv1.DataVolumeBound, Status: corev1.ConditionTrue, Reason: "Bound"},
			{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "Completed"},
			{Type: cdiv1.DataVolumeReady, Status: corev1.ConditionTrue}}})
}

// SetDataVolumeStatus writes the status of the DataVolume name.
func (e *Env) SetDataVolumeStatus(t *testing.T, name string, st cdiv1.DataVolumeStatus) {
	t.Helper()
	ctx := context.Background()
	dv := &cdiv1.DataVolume{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.C.Get(ctx, types.NamespacedName{Namespace: e.NS, Name: name}, dv); err != nil {
			return err
		}
		dv.Status = st
		return e.C.Status().Update(ctx, dv)
	}); err != nil {
		t.Fatalf("DataVolume %s status: %v", name, err)
	}
}
