package instancetype

import (
	"context"
	"fmt"
	"reflect"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypeapi "kubevirt.io/api/instancetype"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RevisionName gives the name of the ControllerRevision of an
// instancetype or preference a VM uses: "<vm>-<object>-<version>-<uid>-
// <generation>" (kubevirt pkg/instancetype/revision/store.go GenerateName).
func RevisionName(vmName, objectName, version string, uid types.UID, generation int64) string {
	return fmt.Sprintf("%s-%s-%s-%s-%d", vmName, objectName, version, uid, generation)
}

// NewControllerRevision gives the ControllerRevision that freezes obj (an
// instancetype.kubevirt.io object as read from the API server) for vm, as
// KubeVirt's CreateControllerRevision (kubevirt
// pkg/instancetype/revision/store.go): named by RevisionName in vm's
// namespace, controlled by vm, labelled with the object's generation,
// kind, name, UID and version (instancetype.kubevirt.io/object-*), its
// data the object without labels, annotations, finalizers, owner
// references and managed fields.
func NewControllerRevision(vm *kubevirtv1.VirtualMachine, obj *unstructured.Unstructured) (*appsv1.ControllerRevision, error) {
	data := obj.DeepCopy()
	for _, f := range []string{"labels", "annotations", "finalizers", "ownerReferences", "managedFields"} {
		unstructured.RemoveNestedField(data.Object, "metadata", f)
	}
	raw, err := data.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	gvk := obj.GroupVersionKind()
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            RevisionName(vm.Name, obj.GetName(), gvk.Version, obj.GetUID(), obj.GetGeneration()),
			Namespace:       vm.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)},
			Labels: map[string]string{
				instancetypeapi.ControllerRevisionObjectGenerationLabel: strconv.FormatInt(obj.GetGeneration(), 10),
				instancetypeapi.ControllerRevisionObjectKindLabel:       gvk.Kind,
				instancetypeapi.ControllerRevisionObjectNameLabel:       obj.GetName(),
				instancetypeapi.ControllerRevisionObjectUIDLabel:        string(obj.GetUID()),
				instancetypeapi.ControllerRevisionObjectVersionLabel:    gvk.Version,
			},
		},
		Data: runtime.RawExtension{Raw: raw},
	}, nil
}

// Store keeps the ControllerRevisions of the instancetype and preference
// a VM uses, as KubeVirt's revision handler (kubevirt
// pkg/instancetype/revision/store.go Store, patch.go): the first time a VM
// names an instancetype (or another one, or another kind), it stores the
// instancetype in a ControllerRevision owned by the VM, after checking
// once more that it does not conflict with the VM, and records its name
// (or the one spec.instancetype.revisionName names) in
// status.instancetypeRef.controllerRevisionRef; the same for
// spec.preference and status.preferenceRef.
type Store struct {
	// Finder reads the instancetypes and preferences.
	Finder Finder
	// Client creates the ControllerRevisions and patches the VM's status.
	Client client.Client
}

// Store stores vm's revisions and patches vm's status.instancetypeRef and
// status.preferenceRef when they change, updating vm from the response.
// An error names what failed: a missing instancetype (the API server's
// NotFound), a conflict (Conflicts), an existing revision of that name
// holding another spec.
func (s Store) Store(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	itRef, err := s.statusRef(ctx, vm, vm.Spec.Instancetype, vm.Status.InstancetypeRef, s.instancetypeRevision)
	if err != nil {
		return err
	}
	prefRef, err := s.statusRef(ctx, vm, vm.Spec.Preference, vm.Status.PreferenceRef, s.preferenceRevision)
	if err != nil {
		return err
	}
	if itRef == nil && prefRef == nil {
		return nil
	}
	patch := client.MergeFrom(vm.DeepCopy())
	if itRef != nil {
		vm.Status.InstancetypeRef = itRef
	}
	if prefRef != nil {
		vm.Status.PreferenceRef = prefRef
	}
	if err := s.Client.Status().Patch(ctx, vm, patch); err != nil {
		return fmt.Errorf("recording the instancetype.kubevirt.io ControllerRevisions in the VirtualMachine's status: %w", err)
	}
	return nil
}

// statusRef gives the status reference m (nil: none) calls for, starting
// from current, or nil when it is current already (kubevirt
// pkg/instancetype/revision/store.go syncStatusWithMatcher): a changed
// name, kind or inferFromVolume drops the revision; revisionName sets it;
// without one a new revision is stored by create.
func (s Store) statusRef(ctx context.Context, vm *kubevirtv1.VirtualMachine, m kubevirtv1.Matcher, current *kubevirtv1.InstancetypeStatusRef,
	create func(context.Context, *kubevirtv1.VirtualMachine) (*appsv1.ControllerRevision, error)) (*kubevirtv1.InstancetypeStatusRef, error) {
	if m == nil || reflect.ValueOf(m).IsNil() {
		return nil, nil
	}
	ref := &kubevirtv1.InstancetypeStatusRef{}
	if current != nil {
		ref = current.DeepCopy()
	}
	drop := false
	if n := m.GetName(); n != "" && n != ref.Name {
		ref.Name, drop = n, true
	}
	if k := m.GetKind(); k != "" && k != ref.Kind {
		ref.Kind, drop = k, true
	}
	if v := m.GetInferFromVolume(); v != "" && v != ref.InferFromVolume {
		ref.InferFromVolume, drop = v, true
	}
	if drop {
		ref.ControllerRevisionRef = nil
	}
	if p := m.GetInferFromVolumeFailurePolicy(); p != nil && (ref.InferFromVolumeFailurePolicy == nil || *ref.InferFromVolumeFailurePolicy != *p) {
		v := *p
		ref.InferFromVolumeFailurePolicy = &v
	}
	if rn := m.GetRevisionName(); rn != "" && (ref.ControllerRevisionRef == nil || ref.ControllerRevisionRef.Name != rn) {
		ref.ControllerRevisionRef = &kubevirtv1.ControllerRevisionRef{Name: rn}
	}
	if ref.ControllerRevisionRef == nil {
		cr, err := create(ctx, vm)
		if err != nil {
			return nil, err
		}
		ref.ControllerRevisionRef = &kubevirtv1.ControllerRevisionRef{Name: cr.Name}
	}
	if equality.Semantic.DeepEqual(current, ref) {
		return nil, nil
	}
	return ref, nil
}

// instancetypeRevision stores the instancetype vm names once it is sure
// it does not conflict with vm's template (kubevirt
// pkg/instancetype/revision/store.go createInstancetypeRevision,
// checkForInstancetypeConflicts).
func (s Store) instancetypeRevision(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*appsv1.ControllerRevision, error) {
	obj, err := s.Finder.InstancetypeObject(ctx, vm)
	if err != nil {
		return nil, err
	}
	spec, err := InstancetypeSpecOf(obj)
	if err != nil {
		return nil, err
	}
	if vm.Spec.Template != nil {
		tmpl := vm.Spec.Template.DeepCopy()
		if cs := ApplyToVMI(field.NewPath("spec", "template", "spec"), spec, nil, &tmpl.Spec, &tmpl.ObjectMeta); len(cs) > 0 {
			return nil, cs
		}
	}
	return s.storeRevision(ctx, vm, obj)
}

// preferenceRevision stores the preference vm names (kubevirt
// pkg/instancetype/revision/store.go createPreferenceRevision).
func (s Store) preferenceRevision(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*appsv1.ControllerRevision, error) {
	obj, err := s.Finder.PreferenceObject(ctx, vm)
	if err != nil {
		return nil, err
	}
	return s.storeRevision(ctx, vm, obj)
}

// storeRevision creates obj's ControllerRevision for vm; an existing one
// of that name is kept when it holds the same spec, and an error
// otherwise (kubevirt pkg/instancetype/revision/store.go
// storeControllerRevision, compare.go).
func (s Store) storeRevision(ctx context.Context, vm *kubevirtv1.VirtualMachine, obj *unstructured.Unstructured) (*appsv1.ControllerRevision, error) {
	cr, err := NewControllerRevision(vm, obj)
	if err != nil {
		return nil, err
	}
	err = s.Client.Create(ctx, cr)
	if err == nil {
		return cr, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("failed to create ControllerRevision: %w", err)
	}
	existing := &appsv1.ControllerRevision{}
	if err := s.Finder.Reader.Get(ctx, client.ObjectKeyFromObject(cr), existing); err != nil {
		return nil, fmt.Errorf("failed to get ControllerRevision: %w", err)
	}
	same, err := sameRevisionSpec(cr, existing)
	if err != nil {
		return nil, err
	}
	if !same {
		return nil, fmt.Errorf("found existing ControllerRevision with unexpected data: %s", cr.Name)
	}
	return existing, nil
}

// sameRevisionSpec reports whether two revisions hold the same kind and
// spec (kubevirt pkg/instancetype/revision/compare.go Compare).
func sameRevisionSpec(a, b *appsv1.ControllerRevision) (bool, error) {
	oa, err := RevisionObject(a)
	if err != nil {
		return false, err
	}
	ob, err := RevisionObject(b)
	if err != nil {
		return false, err
	}
	if oa.GroupVersionKind() != ob.GroupVersionKind() {
		return false, nil
	}
	switch oa.GroupVersionKind() {
	case InstancetypeGVK, ClusterInstancetypeGVK:
		sa, err := InstancetypeSpecOf(oa)
		if err != nil {
			return false, err
		}
		sb, err := InstancetypeSpecOf(ob)
		if err != nil {
			return false, err
		}
		return equality.Semantic.DeepEqual(sa, sb), nil
	default:
		sa, err := PreferenceSpecOf(oa)
		if err != nil {
			return false, err
		}
		sb, err := PreferenceSpecOf(ob)
		if err != nil {
			return false, err
		}
		return equality.Semantic.DeepEqual(sa, sb), nil
	}
}
