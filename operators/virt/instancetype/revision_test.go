package instancetype_test

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/operators/virt/instancetype"
)

// TestNewControllerRevision: the revision of an instancetype a VM uses is
// named, labelled and owned as KubeVirt's (kubevirt
// pkg/instancetype/revision/store.go CreateControllerRevision,
// GenerateName) and holds the object without its metadata noise; the
// stored object reads back (RevisionObject) to the same spec.
func TestNewControllerRevision(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web", UID: "vm-uid"}}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachineClusterInstancetype",
		"metadata": map[string]any{"name": "u1.large", "uid": "it-uid", "generation": int64(3), "resourceVersion": "42",
			"labels": map[string]any{"a": "b"}, "annotations": map[string]any{"c": "d"}, "finalizers": []any{"f"},
			"managedFields": []any{map[string]any{"manager": "m"}}},
		"spec": map[string]any{"cpu": map[string]any{"guest": int64(2)}, "memory": map[string]any{"guest": "8Gi"}},
	}}
	cr, err := instancetype.NewControllerRevision(vm, obj)
	if err != nil {
		t.Fatal(err)
	}
	if want := "web-u1.large-v1beta1-it-uid-3"; cr.Name != want || cr.Namespace != "vms" {
		t.Errorf("revision %s/%s, want vms/%s", cr.Namespace, cr.Name, want)
	}
	if !metav1.IsControlledBy(cr, vm) {
		t.Errorf("owner references %v, want the VM as controller", cr.OwnerReferences)
	}
	wantLabels := map[string]string{
		"instancetype.kubevirt.io/object-generation": "3", "instancetype.kubevirt.io/object-kind": "VirtualMachineClusterInstancetype",
		"instancetype.kubevirt.io/object-name": "u1.large", "instancetype.kubevirt.io/object-uid": "it-uid",
		"instancetype.kubevirt.io/object-version": "v1beta1"}
	if !reflect.DeepEqual(cr.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", cr.Labels, wantLabels)
	}
	for _, noise := range []string{"labels", "annotations", "finalizers", "managedFields"} {
		if strings.Contains(string(cr.Data.Raw), `"`+noise+`"`) {
			t.Errorf("the revision's data keeps %s: %s", noise, cr.Data.Raw)
		}
	}
	back, err := instancetype.RevisionObject(cr)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := instancetype.InstancetypeSpecOf(back)
	if err != nil {
		t.Fatal(err)
	}
	if spec.CPU.Guest != 2 || spec.Memory.Guest.String() != "8Gi" {
		t.Errorf("stored spec %+v, want 2 vCPUs and 8Gi", spec)
	}
	if obj.GetLabels()["a"] != "b" {
		t.Error("NewControllerRevision changed the object it stores")
	}
}

// TestRevisionObjectRefusesOthers: a revision holding anything but an
// instancetype.kubevirt.io/v1beta1 object is an error naming it.
func TestRevisionObjectRefusesOthers(t *testing.T) {
	for _, raw := range []string{
		`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"x"}}`,
		`{"apiVersion":"instancetype.kubevirt.io/v1alpha1","kind":"VirtualMachineInstancetype","metadata":{"name":"x"}}`,
		`not json`,
	} {
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "r"}, Data: runtime.RawExtension{Raw: []byte(raw)}}
		if _, err := instancetype.RevisionObject(cr); err == nil || !strings.Contains(err.Error(), "ControllerRevision vms/r") {
			t.Errorf("%s: error %v, want one naming the revision", raw, err)
		}
	}
}
