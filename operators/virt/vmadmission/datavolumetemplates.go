package vmadmission

import (
	"fmt"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/vmisupport"
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
// upload, and clones of a PVC or DataSource of the VM's namespace), so
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
