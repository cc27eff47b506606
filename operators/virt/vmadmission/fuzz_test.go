package vmadmission_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/api/vmisupport"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// fuzzObsolete are the obsolete CPU models FuzzVMAdmission checks with.
var fuzzObsolete = map[string]bool{"486": true, "pentium": true}

// FuzzVMAdmission decodes arbitrary bytes as YAML (JSON included) and
// checks the object as a VirtualMachine and as a VirtualMachineInstance
// with what the webhook runs: CheckWith, CheckDataVolumeTemplates,
// CheckInstancetypes (no reader) and Validator.Handle. Nothing panics;
// CheckWith gives field errors or an error, never both, and the same
// ones twice; every field error has a reason and a path in the VMI spec
// (spec.template.spec of a VM, spec of a VMI) or, for a VM, in
// spec.dataVolumeTemplates[i] (i a template it has), spec.instancetype or
// spec.preference, sorted by path; Handle denies exactly when those
// checks refuse, one line per field naming the object, errors (400)
// exactly when CheckWith cannot decode the object, and admits an UPDATE
// that changes nothing. The seeds are testdata/fuzz/FuzzVMAdmission; a
// short run: go test -run '^$' -fuzz FuzzVMAdmission -fuzztime 30s
// ./operators/virt/vmadmission
func FuzzVMAdmission(f *testing.F) {
	f.Add([]byte(vmJSON("web", okSpec)))
	f.Add([]byte(vmiJSON("i", gpuSpec)))
	f.Add([]byte(vmJSON("web", typo)))
	f.Add([]byte(vmJSON("web", oldCPU("486"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		raws := [][]byte{data}
		if j, err := sigsyaml.YAMLToJSON(data); err == nil && !reflect.DeepEqual(j, data) {
			raws = append(raws, j)
		}
		for _, raw := range raws {
			for _, kind := range []string{vmadmission.VirtualMachineKind, vmadmission.VirtualMachineInstanceKind} {
				checkAdmission(t, kind, raw)
			}
		}
	})
}

// checkAdmission checks FuzzVMAdmission's properties for raw as kind.
func checkAdmission(t *testing.T, kind string, raw []byte) {
	t.Helper()
	errs, err := vmadmission.CheckWith(kind, raw, fuzzObsolete)
	if err != nil && errs != nil {
		t.Fatalf("%s %q: field errors %v and error %v", kind, raw, errs, err)
	}
	again, err2 := vmadmission.CheckWith(kind, raw, fuzzObsolete)
	if (err == nil) != (err2 == nil) || errs.Error() != again.Error() {
		t.Fatalf("%s %q: CheckWith gave %v, %v, then %v, %v", kind, raw, errs, err, again, err2)
	}
	if !sort.SliceIsSorted(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path }) {
		t.Errorf("%s %q: field errors not sorted by path: %v", kind, raw, errs)
	}
	var vm *kubevirtv1.VirtualMachine
	if err == nil && kind == vmadmission.VirtualMachineKind {
		vm = &kubevirtv1.VirtualMachine{}
		if err := json.Unmarshal(raw, vm); err != nil {
			t.Fatalf("%q: CheckWith decoded the VirtualMachine, json.Unmarshal did not: %v", raw, err)
		}
	}
	spec := vmadmission.SpecPath(kind)
	for _, e := range errs {
		if e.Reason == "" {
			t.Errorf("%s %q: %q without a reason", kind, raw, e.Path)
		}
		if !underPath(e.Path, spec) && !(vm != nil && inTemplates(e.Path, len(vm.Spec.DataVolumeTemplates))) {
			t.Errorf("%s %q: field error outside %s: %v", kind, raw, spec, e)
		}
	}

	var ierrs vmisupport.FieldErrors
	if vm != nil {
		for _, e := range vmadmission.CheckDataVolumeTemplates(vm) {
			if !inTemplates(e.Path, len(vm.Spec.DataVolumeTemplates)) || e.Reason == "" {
				t.Errorf("%q: CheckDataVolumeTemplates: %v", raw, e)
			}
		}
		ierrs = vmadmission.CheckInstancetypes(context.Background(), nil, vm, nil)
		updated := vmadmission.CheckInstancetypes(context.Background(), nil, vm, vm)
		for _, e := range append(append(vmisupport.FieldErrors{}, ierrs...), updated...) {
			if (!underPath(e.Path, "spec.instancetype") && !underPath(e.Path, "spec.preference")) || e.Reason == "" {
				t.Errorf("%q: CheckInstancetypes: %v", raw, e)
			}
		}
	}

	v := vmadmission.Validator{ObsoleteCPUModels: func() map[string]bool { return fuzzObsolete }}
	req := ctrladmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind:      metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: kind},
		Namespace: "default", Name: "fuzz", Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: raw},
	}}
	resp := v.Handle(context.Background(), req)
	what := kind + " default/fuzz"
	switch {
	case err != nil:
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest ||
			!strings.HasPrefix(resp.Result.Message, what+": ") {
			t.Errorf("%s %q: CheckWith error %v; Handle gave %+v, want 400 naming %s", kind, raw, err, resp.Result, what)
		}
	case len(errs)+len(ierrs) == 0:
		if !resp.Allowed {
			t.Errorf("%s %q: no field refused; Handle gave %+v", kind, raw, resp.Result)
		}
	default:
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden {
			t.Fatalf("%s %q: fields refused (%v); Handle gave %+v", kind, raw, append(errs, ierrs...), resp.Result)
		}
		if got := strings.Count(resp.Result.Message, "\n") + 1; got < len(errs)+len(ierrs) {
			t.Errorf("%s %q: %d lines for %d refused fields:\n%s", kind, raw, got, len(errs)+len(ierrs), resp.Result.Message)
		}
		if !strings.HasPrefix(resp.Result.Message, what+": spec") {
			t.Errorf("%s %q: denial not naming the object and a spec field:\n%s", kind, raw, resp.Result.Message)
		}
	}

	if err == nil {
		req.Operation = admissionv1.Update
		req.OldObject = runtime.RawExtension{Raw: raw}
		if resp := v.Handle(context.Background(), req); !resp.Allowed {
			t.Errorf("%s %q: an UPDATE changing nothing refused: %+v", kind, raw, resp.Result)
		}
	}
}

// underPath reports whether path is p or a field or item under it.
func underPath(path, p string) bool {
	rest, ok := strings.CutPrefix(path, p)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// inTemplates reports whether path is under spec.dataVolumeTemplates[i]
// for an i below n.
func inTemplates(path string, n int) bool {
	for i := 0; i < n; i++ {
		if underPath(path, "spec.dataVolumeTemplates["+strconv.Itoa(i)+"]") {
			return true
		}
	}
	return false
}
