package instancetype

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypeapi "kubevirt.io/api/instancetype"
	"kubevirt.io/api/instancetype/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Finder finds the instancetype and preference specs a VM uses, as
// KubeVirt's specFinders (kubevirt pkg/instancetype/find/spec.go,
// revision.go; preference/find/spec.go, revision.go): from the
// ControllerRevision spec.instancetype.revisionName names, else the one
// status.instancetypeRef.controllerRevisionRef names when it holds the
// instancetype the VM names, else the instancetype object itself (and the
// same for preferences).
type Finder struct {
	// Reader reads ControllerRevisions and the instancetype.kubevirt.io
	// objects (as unstructured objects: no scheme needs their types).
	Reader client.Reader
}

// Instancetype gives the spec of the instancetype vm uses (nil when vm
// names none), or the error of finding it (a NotFound error from the API
// server when it does not exist; KubeVirt's message for an unknown kind).
func (f Finder) Instancetype(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*v1beta1.VirtualMachineInstancetypeSpec, error) {
	m := vm.Spec.Instancetype
	if m == nil {
		return nil, nil
	}
	obj, err := f.revisionObject(ctx, vm.Namespace, m.Name, m.RevisionName, vm.Status.InstancetypeRef)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		if obj, err = f.InstancetypeObject(ctx, vm); err != nil {
			return nil, err
		}
	}
	return InstancetypeSpecOf(obj)
}

// Preference is Instancetype for the preference vm uses.
func (f Finder) Preference(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*v1beta1.VirtualMachinePreferenceSpec, error) {
	m := vm.Spec.Preference
	if m == nil {
		return nil, nil
	}
	obj, err := f.revisionObject(ctx, vm.Namespace, m.Name, m.RevisionName, vm.Status.PreferenceRef)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		if obj, err = f.PreferenceObject(ctx, vm); err != nil {
			return nil, err
		}
	}
	return PreferenceSpecOf(obj)
}

// InstancetypeObject reads the instancetype object vm's matcher names
// (of its kind: cluster-scoped, or in vm's namespace).
func (f Finder) InstancetypeObject(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*unstructured.Unstructured, error) {
	gvk, namespaced, err := InstancetypeKind(vm.Spec.Instancetype.Kind)
	if err != nil {
		return nil, err
	}
	return f.get(ctx, gvk, namespaced, vm.Namespace, vm.Spec.Instancetype.Name)
}

// PreferenceObject reads the preference object vm's matcher names.
func (f Finder) PreferenceObject(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*unstructured.Unstructured, error) {
	gvk, namespaced, err := PreferenceKind(vm.Spec.Preference.Kind)
	if err != nil {
		return nil, err
	}
	return f.get(ctx, gvk, namespaced, vm.Namespace, vm.Spec.Preference.Name)
}

func (f Finder) get(ctx context.Context, gvk schema.GroupVersionKind, namespaced bool, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	key := types.NamespacedName{Name: name}
	if namespaced {
		key.Namespace = namespace
	}
	if err := f.Reader.Get(ctx, key, u); err != nil {
		return nil, err
	}
	return u, nil
}

// revisionObject gives the object stored in the ControllerRevision
// revisionName names, else in the one ref names when its object-name
// label is name (KubeVirt: "only return the found CR if it is for the
// referenced instance type"), else nil.
func (f Finder) revisionObject(ctx context.Context, namespace, name, revisionName string, ref *kubevirtv1.InstancetypeStatusRef) (*unstructured.Unstructured, error) {
	if revisionName != "" {
		cr, err := f.revision(ctx, namespace, revisionName)
		if err != nil {
			return nil, err
		}
		return RevisionObject(cr)
	}
	if ref == nil || ref.ControllerRevisionRef == nil || ref.ControllerRevisionRef.Name == "" {
		return nil, nil
	}
	cr, err := f.revision(ctx, namespace, ref.ControllerRevisionRef.Name)
	if err != nil {
		return nil, err
	}
	if cr.Labels[instancetypeapi.ControllerRevisionObjectNameLabel] != name {
		return nil, nil
	}
	return RevisionObject(cr)
}

func (f Finder) revision(ctx context.Context, namespace, name string) (*appsv1.ControllerRevision, error) {
	cr := &appsv1.ControllerRevision{}
	if err := f.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cr); err != nil {
		return nil, err
	}
	return cr, nil
}

// RevisionObject gives the instancetype.kubevirt.io/v1beta1 object a
// ControllerRevision stores (data), or an error naming the revision when
// it holds anything else (kubevirt pkg/instancetype/compatibility/
// compatibility.go: only v1beta1 is left in kubevirt.io/api v1.9).
func RevisionObject(cr *appsv1.ControllerRevision) (*unstructured.Unstructured, error) {
	raw := cr.Data.Raw
	if len(raw) == 0 && cr.Data.Object != nil {
		var err error
		if raw, err = json.Marshal(cr.Data.Object); err != nil {
			return nil, fmt.Errorf("ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
		}
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s/%s: failed to decode object in ControllerRevision: %w", cr.Namespace, cr.Name, err)
	}
	switch u.GroupVersionKind() {
	case InstancetypeGVK, ClusterInstancetypeGVK, PreferenceGVK, ClusterPreferenceGVK:
		return u, nil
	}
	return nil, fmt.Errorf("ControllerRevision %s/%s: unexpected type in ControllerRevision: %s", cr.Namespace, cr.Name, u.GroupVersionKind())
}

// InstancetypeSpecOf converts an instancetype (namespaced or cluster) object
// to its spec.
func InstancetypeSpecOf(u *unstructured.Unstructured) (*v1beta1.VirtualMachineInstancetypeSpec, error) {
	switch u.GroupVersionKind() {
	case InstancetypeGVK, ClusterInstancetypeGVK:
	default:
		return nil, fmt.Errorf("%s %s: not an instancetype", u.GetKind(), u.GetName())
	}
	it := &v1beta1.VirtualMachineClusterInstancetype{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, it); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return &it.Spec, nil
}

// PreferenceSpecOf converts a preference (namespaced or cluster) object to
// its spec.
func PreferenceSpecOf(u *unstructured.Unstructured) (*v1beta1.VirtualMachinePreferenceSpec, error) {
	switch u.GroupVersionKind() {
	case PreferenceGVK, ClusterPreferenceGVK:
	default:
		return nil, fmt.Errorf("%s %s: not a preference", u.GetKind(), u.GetName())
	}
	p := &v1beta1.VirtualMachineClusterPreference{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return &p.Spec, nil
}
