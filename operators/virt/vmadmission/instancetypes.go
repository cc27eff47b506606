package vmadmission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/converge-dev/converge/api/vmisupport"
	"github.com/converge-dev/converge/operators/virt/instancetype"
)

// instancetypePaths are the VM fields besides its VMI spec whose change
// an UPDATE is checked for: the matchers CheckInstancetypes reads.
var instancetypePaths = []string{"spec.instancetype", "spec.preference"}

// CheckInstancetypes gives the fields of vm (old: the VM before an
// UPDATE, nil on CREATE) its spec.instancetype and spec.preference make
// converge refuse, as KubeVirt's virt-api refuses them (kubevirt
// pkg/virt-api/webhooks/validating-webhook/admitters/vms-admitter.go
// Admit, pkg/instancetype/webhooks/vm/admitter.go ApplyToVM,
// mutator.go validateMatchers), with paths from the VM's root and
// KubeVirt's messages:
//   - the matchers (instancetype.ValidateMatchers: a name required, a
//     kind KubeVirt knows, no inferFromVolume, a revisionName changed
//     with the name);
//   - with r (nil: no lookups), the instancetype and preference read from
//     the cluster (their revisions once the VM controller stored them):
//     one that does not exist yet is admitted, as KubeVirt does (the VM
//     controller reports it, Failure FailedFindInstancetype); a spread
//     topology that does not divide the vCPUs (instancetype.spec.cpu.guest);
//     every template field the instancetype sets too ("VM field(s) ...
//     conflicts with selected instance type"); a preference requirement
//     not met ("failure checking preference requirements: ..."); and the
//     fields the expansion adds that converge does not run
//     (vmisupport.CheckSpec), naming the instancetype or preference that
//     sets them; and dataVolumeTemplates without a storage class when the
//     preference prefers one (KubeVirt's mutating webhook fills it in).
func CheckInstancetypes(ctx context.Context, r client.Reader, vm, old *kubevirtv1.VirtualMachine) vmisupport.FieldErrors {
	var errs vmisupport.FieldErrors
	for _, c := range instancetype.ValidateMatchers(vm, old) {
		errs.Add(c.Path.String(), "%s", c.Error())
	}
	if len(errs) > 0 || r == nil || vm.Spec.Template == nil || (vm.Spec.Instancetype == nil && vm.Spec.Preference == nil) {
		return errs
	}
	f := instancetype.Finder{Reader: r}
	// KubeVirt ignores a failed lookup here (ApplyToVM logs "ignoring
	// err"): the VM controller reports it.
	it, _ := f.Instancetype(ctx, vm)
	pref, _ := f.Preference(ctx, vm)
	if it == nil && pref == nil {
		return nil
	}
	if c := instancetype.CheckSpreadCPUTopology(it, pref); c != nil {
		errs.Add(c.Path.String(), "%s", c.Error())
		return errs
	}
	tmplPath := field.NewPath("spec", "template", "spec")
	expanded := vm.Spec.Template.DeepCopy()
	if cs := instancetype.ApplyToVMI(tmplPath, it, pref, &expanded.Spec, &expanded.ObjectMeta); len(cs) > 0 {
		for _, c := range cs {
			errs.Add(c.Path.String(), "%s", (&instancetype.Conflict{Path: c.Path}).Error())
		}
		return errs
	}
	if cs, err := instancetype.CheckRequirements(it, pref, &expanded.Spec); err != nil {
		errs.Add(cs.String(), "%s%v", instancetype.RequirementsFailedPrefix, err)
		return errs
	}
	errs = append(errs, expandedUnsupported(vm, it, pref)...)
	return append(errs, preferredStorageClass(vm, pref)...)
}

// preferredStorageClass refuses the dataVolumeTemplates without a storage
// class when vm's preference names one: KubeVirt's mutating webhook sets
// it on them (kubevirt pkg/instancetype/webhooks/vm/mutator.go
// mutateDataVolumeTemplates); converge has no mutating webhook, and its
// DataVolumes would silently take the default class.
func preferredStorageClass(vm *kubevirtv1.VirtualMachine, pref *v1beta1.VirtualMachinePreferenceSpec) vmisupport.FieldErrors {
	if pref == nil || pref.Volumes == nil || pref.Volumes.PreferredStorageClassName == "" {
		return nil
	}
	var errs vmisupport.FieldErrors
	for i, dv := range vm.Spec.DataVolumeTemplates {
		var where string
		switch {
		case dv.Spec.PVC != nil && dv.Spec.PVC.StorageClassName == nil:
			where = "pvc"
		case dv.Spec.Storage != nil && dv.Spec.Storage.StorageClassName == nil:
			where = "storage"
		default:
			continue
		}
		errs.Add(fmt.Sprintf("spec.dataVolumeTemplates[%d].spec.%s.storageClassName", i, where),
			"unset, and the preference's volumes.preferredStorageClassName %q is not applied by converge (KubeVirt's mutating webhook sets it): set it here",
			pref.Volumes.PreferredStorageClassName)
	}
	return errs
}

// expandedUnsupported gives the fields of vm's expanded template that
// vmisupport.CheckSpec refuses and vm's own template does not have, each
// naming what set it: the instancetype's fields first, then the
// preference's.
func expandedUnsupported(vm *kubevirtv1.VirtualMachine, it *v1beta1.VirtualMachineInstancetypeSpec, pref *v1beta1.VirtualMachinePreferenceSpec) vmisupport.FieldErrors {
	seen := map[string]bool{}
	for _, e := range vmisupport.CheckSpec(&vm.Spec.Template.Spec) {
		seen[e.Path] = true
	}
	var errs vmisupport.FieldErrors
	add := func(spec *kubevirtv1.VirtualMachineInstanceSpec, by string) {
		for _, e := range vmisupport.CheckSpec(spec) {
			if !seen[e.Path] {
				seen[e.Path] = true
				errs.Add("spec.template.spec"+strings.TrimPrefix(e.Path, "spec"), "%s (set by %s)", e.Reason, by)
			}
		}
	}
	tmplPath := field.NewPath("spec", "template", "spec")
	if it != nil {
		t := vm.Spec.Template.DeepCopy()
		instancetype.ApplyToVMI(tmplPath, it, nil, &t.Spec, &t.ObjectMeta)
		add(&t.Spec, matcherName(vm.Spec.Instancetype.Kind, vm.Spec.Instancetype.Name, instancetype.InstancetypeKind))
	}
	if pref != nil {
		t := vm.Spec.Template.DeepCopy()
		// as the VM controller expands it (instancetype.Finder.ApplyToNewVMI)
		instancetype.ApplyAutoattachPreferences(pref, &t.Spec)
		instancetype.AddDefaultPodInterface(pref, &t.Spec)
		instancetype.ApplyToVMI(tmplPath, it, pref, &t.Spec, &t.ObjectMeta)
		add(&t.Spec, matcherName(vm.Spec.Preference.Kind, vm.Spec.Preference.Name, instancetype.PreferenceKind))
	}
	return errs
}

// matcherName gives "<Kind> <name>" of a matcher's object.
func matcherName(kind, name string, kindOf func(string) (schema.GroupVersionKind, bool, error)) string {
	gvk, _, err := kindOf(kind)
	if err != nil {
		return name
	}
	return gvk.Kind + " " + name
}

// instancetypeErrors decodes req's VM (and the VM before an UPDATE) and
// gives CheckInstancetypes' errors, reading through v.Instancetypes.
func (v Validator) instancetypeErrors(ctx context.Context, req ctrladmission.Request) (vmisupport.FieldErrors, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(req.Object.Raw, vm); err != nil {
		return nil, fmt.Errorf("decoding the VirtualMachine: %w", err)
	}
	var old *kubevirtv1.VirtualMachine
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old = &kubevirtv1.VirtualMachine{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return nil, fmt.Errorf("decoding the old object: %w", err)
		}
	}
	return CheckInstancetypes(ctx, v.Instancetypes, vm, old), nil
}
