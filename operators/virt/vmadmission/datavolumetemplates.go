package vmadmission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/vmisupport"
	"github.com/converge-dev/converge/operators/cdi/cloneauth"
)

// CheckDataVolumeTemplates gives the fields of vm's
// spec.dataVolumeTemplates the webhook refuses: what KubeVirt's virt-api
// refuses (pkg/storage/admitters/data-volume-template.go
// ValidateDataVolumeTemplate, with its messages: an empty name, neither or
// both of spec.pvc and spec.storage, a source with external population,
// no source, several sources, a template no volume of spec.template
// references), a namespace other than the VM's (its DataVolume could not
// be created there), and a source converge's DataVolume controller does
// not import or clone (api/datavolume SourceKind: http, registry, blank,
// upload, and clones of a PVC or DataSource; whether the requester may
// clone from another namespace is CheckDataVolumeClones'), so
// that such a VM is refused rather than left with a Failed DataVolume.
// Paths are the fields' own (spec.dataVolumeTemplates[i]...).
func CheckDataVolumeTemplates(vm *kubevirtv1.VirtualMachine) vmisupport.FieldErrors {
	var errs vmisupport.FieldErrors
	add := func(path, reason string) { errs = append(errs, &vmisupport.FieldError{Path: path, Reason: reason}) }
	for i := range vm.Spec.DataVolumeTemplates {
		t := &vm.Spec.DataVolumeTemplates[i]
		at := fmt.Sprintf("spec.dataVolumeTemplates[%d]", i)
		if reason, field := kubevirtTemplateError(t); reason != "" {
			add(at+field, reason)
			continue
		}
		if !referenced(vm, t.Name) {
			add(at, fmt.Sprintf("DataVolumeTemplate entry %s must be referenced in the VMI template's 'volumes' list", at))
		}
		if t.Namespace != "" && vm.Namespace != "" && t.Namespace != vm.Namespace {
			add(at+".metadata.namespace", fmt.Sprintf("%q: a VirtualMachine's DataVolumes are created in its namespace %q", t.Namespace, vm.Namespace))
		}
		dv := &cdiv1.DataVolume{Spec: t.Spec}
		dv.Namespace, dv.Name = vm.Namespace, t.Name
		if _, err := dvapi.SourceKind(dv); err != nil {
			field := ".spec.source"
			if t.Spec.SourceRef != nil {
				field = ".spec.sourceRef"
			}
			add(at+field, strings.TrimPrefix(err.Error(), fmt.Sprintf("DataVolume %s/%s: ", dv.Namespace, dv.Name))+" (converge's DataVolume controller)")
		}
	}
	return errs
}

// kubevirtTemplateError gives KubeVirt's reason (validateDataVolume) for
// template t and the field under the template it concerns, "" when
// KubeVirt accepts it.
func kubevirtTemplateError(t *kubevirtv1.DataVolumeTemplateSpec) (reason, field string) {
	s := &t.Spec
	switch {
	case t.Name == "":
		return "'name' field must not be empty for DataVolumeTemplate entry", ".metadata.name"
	case s.PVC == nil && s.Storage == nil:
		return "Missing Data volume PVC or Storage", ".spec"
	case s.PVC != nil && s.Storage != nil:
		return "Duplicate storage definition, both target storage and target pvc defined", ".spec"
	}
	external := false
	if s.PVC != nil {
		external = s.PVC.DataSource != nil || s.PVC.DataSourceRef != nil
	} else {
		external = s.Storage.DataSource != nil || s.Storage.DataSourceRef != nil
	}
	switch {
	case external && (s.Source != nil || s.SourceRef != nil):
		return "External population is incompatible with Source and SourceRef", ".spec.source"
	case !external && s.Source == nil && s.SourceRef == nil:
		return "Data volume should have either Source, SourceRef, or be externally populated", ".spec.source"
	case s.Source != nil:
		switch n := countSources(s.Source); {
		case n == 0:
			return "Missing dataVolume valid source", ".spec.source"
		case n > 1:
			return "Multiple dataVolume sources", ".spec.source"
		}
	}
	return "", ""
}

// countSources counts the sources set in s (CDI v1.64's DataVolumeSource).
func countSources(s *cdiv1.DataVolumeSource) int {
	n := 0
	for _, set := range []bool{s.HTTP != nil, s.S3 != nil, s.GCS != nil, s.Registry != nil, s.PVC != nil, s.Upload != nil,
		s.Blank != nil, s.Imageio != nil, s.VDDK != nil, s.Snapshot != nil} {
		if set {
			n++
		}
	}
	return n
}

// referenced reports whether a volume of vm's template uses the
// DataVolume name (a persistentVolumeClaim's claimName or a dataVolume's
// name), as KubeVirt checks.
func referenced(vm *kubevirtv1.VirtualMachine, name string) bool {
	if vm.Spec.Template == nil {
		return false
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name) || (v.DataVolume != nil && v.DataVolume.Name == name) {
			return true
		}
	}
	return false
}

// CheckDataVolumeClones gives the dataVolumeTemplates of vm whose clone
// from another namespace user may not make, as KubeVirt's VM admitter
// (pkg/virt-api/webhooks/validating-webhook/admitters/vms-admitter.go
// authorizeVirtualMachineSpec): each template's DataVolume, in vm's
// namespace, is authorized with cdiv1 DataVolume.AuthorizeUser through
// proxy (create on datavolumes/source, or pods, in the source namespace),
// and a refusal is CDI's reason on spec.dataVolumeTemplates[i]. A
// template that does not clone, or clones within the namespace, passes; a
// DataSource that does not exist is an error only when it is in another
// namespace (a clone within the namespace waits for it).
func CheckDataVolumeClones(vm *kubevirtv1.VirtualMachine, proxy cdiv1.AuthorizationHelperProxy, user authenticationv1.UserInfo) (vmisupport.FieldErrors, error) {
	var errs vmisupport.FieldErrors
	for i := range vm.Spec.DataVolumeTemplates {
		t := &vm.Spec.DataVolumeTemplates[i]
		dv := &cdiv1.DataVolume{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
		dv.Namespace = vm.Namespace
		resp, err := dv.AuthorizeUser(vm.Namespace, vm.Name, proxy, user)
		switch {
		case errors.Is(err, cdiv1.ErrNoTokenOkay):
		case apierrors.IsNotFound(err) && t.Spec.SourceRef != nil && (t.Spec.SourceRef.Namespace == nil || *t.Spec.SourceRef.Namespace == "" || *t.Spec.SourceRef.Namespace == vm.Namespace):
		case err != nil:
			return nil, fmt.Errorf("spec.dataVolumeTemplates[%d]: authorizing the clone: %w", i, err)
		case !resp.Allowed:
			errs = append(errs, &vmisupport.FieldError{Path: fmt.Sprintf("spec.dataVolumeTemplates[%d]", i), Reason: resp.Reason})
		}
	}
	return errs, nil
}

// cloneErrors decodes req's VirtualMachine and gives
// CheckDataVolumeClones for the requesting user, reading through
// Instancetypes (uncached) when set, else Clones.
func (v Validator) cloneErrors(ctx context.Context, req ctrladmission.Request) (vmisupport.FieldErrors, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(req.Object.Raw, vm); err != nil {
		return nil, fmt.Errorf("decoding the VirtualMachine: %w", err)
	}
	if vm.Namespace == "" {
		vm.Namespace = req.Namespace
	}
	var reader client.Reader = v.Clones
	if v.Instancetypes != nil {
		reader = v.Instancetypes // uncached
	}
	return CheckDataVolumeClones(vm, cloneauth.Proxy{Ctx: ctx, Client: v.Clones, Reader: reader}, req.UserInfo)
}
