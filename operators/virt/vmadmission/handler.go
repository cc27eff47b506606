package vmadmission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/converge-dev/converge/internal/webhook"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Validator is the admission handler of both webhooks.
type Validator struct {
	// ObsoleteCPUModels, when set, gives the CPU models a VMI may not use
	// (the native KubeVirt CR's spec.configuration.obsoleteCPUModels,
	// those set true); read at each request.
	ObsoleteCPUModels func() map[string]bool
	// Instancetypes, when set, reads the instancetypes, preferences and
	// ControllerRevisions a VirtualMachine names (CheckInstancetypes);
	// without it only its matchers are checked.
	Instancetypes client.Reader
	// Clones, when set, creates the SubjectAccessReviews that authorize
	// the requesting user's clones from another namespace in a
	// VirtualMachine's dataVolumeTemplates (CheckDataVolumeClones), and
	// reads their Namespaces and DataSources (uncached).
	Clones client.Client
}

var _ ctrladmission.Handler = Validator{}

// Handle takes an AdmissionReview request for a kubevirt.io/v1
// VirtualMachine or VirtualMachineInstance and gives:
//   - allowed, for operations other than CREATE and UPDATE, and for an
//     UPDATE that leaves the VMI spec (and a VM's instancetype and
//     preference matchers) as it was (metadata, runStrategy or other VM
//     fields: an object stored before converge refused its fields can
//     still be stopped, relabelled or have its finalizers removed);
//   - denied, with Message's lines, when CheckWith finds fields converge
//     refuses (obsolete CPU models per ObsoleteCPUModels), or, for a
//     VirtualMachine, CheckInstancetypes (reading through Instancetypes)
//     or CheckDataVolumeClones (with Clones);
//   - an error (400) naming the object when its JSON does not decode, or
//     the kind is neither.
func (v Validator) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return ctrladmission.Allowed("")
	}
	kind := req.Kind.Kind
	name := webhook.RequestName(req)
	what := kind + " " + req.Namespace + "/" + name
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		same, err := sameSpec(kind, req.OldObject.Raw, req.Object.Raw)
		if err != nil {
			return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", what, err))
		}
		if same {
			return ctrladmission.Allowed(SpecPath(kind) + " unchanged")
		}
	}
	var obsolete map[string]bool
	if v.ObsoleteCPUModels != nil {
		obsolete = v.ObsoleteCPUModels()
	}
	errs, err := CheckWith(kind, req.Object.Raw, obsolete)
	if err != nil {
		return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", what, err))
	}
	if kind == VirtualMachineKind {
		ierrs, err := v.instancetypeErrors(ctx, req)
		if err != nil {
			return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", what, err))
		}
		errs = append(errs, ierrs...)
		if v.Clones != nil {
			cerrs, err := v.cloneErrors(ctx, req)
			if err != nil {
				return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", what, err))
			}
			errs = append(errs, cerrs...)
		}
	}
	if len(errs) > 0 {
		return ctrladmission.Denied(Message(what, errs))
	}
	return ctrladmission.Allowed("")
}

// sameSpec reports whether old and new have equal VMI specs (at
// SpecPath(kind)) and, for a VirtualMachine, equal instancetype and
// preference matchers, compared as decoded JSON.
func sameSpec(kind string, old, new []byte) (bool, error) {
	path := SpecPath(kind)
	if path == "" {
		return false, fmt.Errorf("kind %q: want %s or %s", kind, VirtualMachineKind, VirtualMachineInstanceKind)
	}
	paths := []string{path}
	if kind == VirtualMachineKind {
		paths = append(paths, instancetypePaths...)
	}
	for _, p := range paths {
		a, err := specAt(old, p)
		if err != nil {
			return false, fmt.Errorf("decoding the old object: %w", err)
		}
		b, err := specAt(new, p)
		if err != nil {
			return false, fmt.Errorf("decoding the %s: %w", kind, err)
		}
		if !reflect.DeepEqual(a, b) {
			return false, nil
		}
	}
	return true, nil
}

// specAt gives the value at the dotted path of the JSON object raw (nil
// when absent).
func specAt(raw []byte, path string) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil
		}
		v = m[k]
	}
	return v, nil
}
