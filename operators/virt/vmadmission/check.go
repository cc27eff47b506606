package vmadmission

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/converge-dev/converge/api/vmisupport"
)

// The kinds the webhook checks.
const (
	// VirtualMachineKind is kubevirt.io/v1 VirtualMachine, checked at
	// spec.template.spec.
	VirtualMachineKind = "VirtualMachine"
	// VirtualMachineInstanceKind is kubevirt.io/v1 VirtualMachineInstance,
	// checked at spec.
	VirtualMachineInstanceKind = "VirtualMachineInstance"
)

// UnknownFieldReason is the reason given for a field the kubevirt.io/v1
// API does not have.
const UnknownFieldReason = "unknown field: not in the kubevirt.io/v1 API (misspelt?)"

// SpecPath gives where kind keeps its VMI spec: "spec.template.spec" for
// a VirtualMachine, "spec" for a VirtualMachineInstance, "" for any other
// kind.
func SpecPath(kind string) string {
	switch kind {
	case VirtualMachineKind:
		return "spec.template.spec"
	case VirtualMachineInstanceKind:
		return "spec"
	}
	return ""
}

// Check is CheckWith without obsolete CPU models.
func Check(kind string, raw []byte) (vmisupport.FieldErrors, error) {
	return CheckWith(kind, raw, nil)
}

// CheckWith takes a kind (VirtualMachineKind or VirtualMachineInstanceKind),
// the object's JSON and the CPU models KubeVirt's configuration marks
// obsolete (spec.configuration.obsoleteCPUModels, those set true), and
// gives every field of its VMI spec converge refuses, with paths from the
// object's root (e.g. spec.template.spec.domain.devices.gpus for a
// VirtualMachine), sorted by path: the fields vmisupport.CheckSpec rejects
// or does not know, the fields the kubevirt.io/v1 types do not have
// (UnknownFieldReason), and spec.domain.cpu.model when it names an obsolete
// model (as KubeVirt's virt-api refuses it, pkg/virt-api/webhooks
// validating-webhook admitters: "CPU model ... is obsolete"), and for a
// VirtualMachine the spec.dataVolumeTemplates fields
// CheckDataVolumeTemplates refuses. A VM without spec.template has no VMI
// spec to check. The error is for an object that is not JSON of that kind
// (a field of the wrong type) or an unknown kind.
func CheckWith(kind string, raw []byte, obsolete map[string]bool) (vmisupport.FieldErrors, error) {
	var obj any
	var spec func() *kubevirtv1.VirtualMachineInstanceSpec
	switch kind {
	case VirtualMachineKind:
		vm := &kubevirtv1.VirtualMachine{}
		obj = vm
		spec = func() *kubevirtv1.VirtualMachineInstanceSpec {
			if vm.Spec.Template == nil {
				return nil
			}
			return &vm.Spec.Template.Spec
		}
	case VirtualMachineInstanceKind:
		vmi := &kubevirtv1.VirtualMachineInstance{}
		obj = vmi
		spec = func() *kubevirtv1.VirtualMachineInstanceSpec { return &vmi.Spec }
	default:
		return nil, fmt.Errorf("kind %q: want %s or %s", kind, VirtualMachineKind, VirtualMachineInstanceKind)
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, fmt.Errorf("decoding the %s: %w", kind, err)
	}
	prefix := SpecPath(kind)
	errs, err := unknownFields(raw, prefix)
	if err != nil {
		return nil, fmt.Errorf("decoding the %s: %w", kind, err)
	}
	if s := spec(); s != nil {
		for _, e := range vmisupport.CheckSpec(s) {
			// CheckSpec's paths start at the VMI's "spec"
			errs = append(errs, &vmisupport.FieldError{Path: prefix + strings.TrimPrefix(e.Path, "spec"), Reason: e.Reason})
		}
		if c := s.Domain.CPU; c != nil && obsolete[c.Model] {
			errs = append(errs, &vmisupport.FieldError{Path: prefix + ".domain.cpu.model",
				Reason: fmt.Sprintf("CPU model %q is obsolete (KubeVirt spec.configuration.obsoleteCPUModels)", c.Model)})
		}
	}
	if vm, ok := obj.(*kubevirtv1.VirtualMachine); ok {
		errs = append(errs, CheckDataVolumeTemplates(vm)...)
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
	return errs, nil
}

// Message takes the object's name (e.g. "VirtualMachine default/web") and
// its field errors, and gives the denial message: one line per field,
// `<name>: <path>: <reason>`, as the hco-webhook's (hcowebhook.Message).
func Message(name string, errs vmisupport.FieldErrors) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = name + ": " + e.Error()
	}
	return strings.Join(lines, "\n")
}

// specFields is the VMI spec without its UnmarshalJSON method (which
// decodes through a second, non-strict decoder), so that a strict decoder
// sees every field. PodNetwork and DHCPOptions keep theirs: their own
// fields are not checked for typos.
type specFields kubevirtv1.VirtualMachineInstanceSpec

// unknownFields gives a FieldError for every field of the VMI spec at
// prefix (dotted) in the JSON object raw that the kubevirt.io/v1 types do
// not have.
func unknownFields(raw []byte, prefix string) (vmisupport.FieldErrors, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	for _, k := range strings.Split(prefix, ".") {
		m, _ := v.(map[string]any)
		if v = m[k]; v == nil {
			return nil, nil
		}
	}
	spec, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	strict, err := sigsjson.UnmarshalStrict(spec, &specFields{}, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	var errs vmisupport.FieldErrors
	for _, e := range strict {
		var fp interface{ FieldPath() string }
		if errors.As(e, &fp) {
			errs = append(errs, &vmisupport.FieldError{Path: prefix + "." + fp.FieldPath(), Reason: UnknownFieldReason})
		}
	}
	return errs, nil
}
