// Package hcowebhook is converge's hco-webhook: a validating admission
// webhook for HyperConverged (hco.kubevirt.io v1beta1 and v1) that
// evaluates the same CUE schema and component derivation as `converge
// vet`/`render`, so that `kubectl apply` of a HyperConverged converge
// could not render is refused with the same CUE path and message, and the
// /convert conversion webhook between the two versions. It follows HCO
// pkg/webhooks/validator (validator.go, v1beta1_validator.go) and
// pkg/webhooks/setup.go; Webhook describes it for internal/webhook's
// Registrar.
package hcowebhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/converge-dev/converge/internal/graph"
)

// Validator is the admission handler for HyperConverged, converge's
// counterpart of HCO's validator.WebhookHandler and
// WebhookV1Beta1Handler (one handler serves both versions: the schema
// dispatches on apiVersion). It is safe for concurrent use (the engine
// serialises renders).
type Validator struct {
	// Engine validates and renders the object.
	Engine *graph.Engine
	// Facts gives the cluster facts the object is rendered for (the
	// controller's facts.Discover); nil renders for the schema defaults.
	Facts func(context.Context) (map[string]any, error)
}

var _ ctrladmission.Handler = (*Validator)(nil)

// Handle takes an admission request for a HyperConverged and gives the
// decision. CREATE and UPDATE render the object with graph.Engine.Render
// for the cluster facts and deny with the render's error lines (see
// Message); an UPDATE that changes neither spec nor annotations is
// allowed without rendering, as HCO's validateUpdate; DELETE and CONNECT
// are allowed (HCO dry-run deletes KubeVirt and CDI on DELETE; converge
// has no such guard yet). The object's status is not validated: a write
// to the main resource cannot change it.
func (v *Validator) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	switch req.Operation {
	case admissionv1.Create:
	case admissionv1.Update:
		same, err := sameSpecAndAnnotations(req.OldObject.Raw, req.Object.Raw)
		if err != nil {
			return ctrladmission.Errored(http.StatusBadRequest, err)
		}
		if same {
			return ctrladmission.Allowed("spec and annotations unchanged")
		}
	default:
		return ctrladmission.Allowed("")
	}
	name := fmt.Sprintf("HyperConverged %s/%s", req.Namespace, req.Name)
	obj, err := withoutStatus(req.Object.Raw)
	if err != nil {
		return ctrladmission.Errored(http.StatusBadRequest, err)
	}
	cfg, err := v.Engine.ConfigFromObject(name, obj)
	if err != nil {
		return ctrladmission.Denied(Message(name, err))
	}
	var facts map[string]any
	if v.Facts != nil {
		if facts, err = v.Facts(ctx); err != nil {
			return ctrladmission.Errored(http.StatusInternalServerError, fmt.Errorf("reading the cluster facts: %w", err))
		}
	}
	if _, err := v.Engine.RenderContext(ctx, cfg, graph.Inputs{Facts: facts}); err != nil {
		if ctx.Err() != nil { // the API server's webhook timeout, not a verdict
			return ctrladmission.Errored(http.StatusServiceUnavailable, err)
		}
		return ctrladmission.Denied(Message(name, err))
	}
	// HCO's warnings (deprecated or unknown gates, highBurst…) reach
	// kubectl without refusing the object.
	return ctrladmission.Allowed("").WithWarnings(v.Engine.Warnings(cfg)...)
}

// sameSpecAndAnnotations reports whether two HyperConverged objects (JSON)
// have equal spec and metadata.annotations (absent and empty are equal).
func sameSpecAndAnnotations(oldRaw, newRaw []byte) (bool, error) {
	var o, n struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec any `json:"spec"`
	}
	if err := json.Unmarshal(oldRaw, &o); err != nil {
		return false, fmt.Errorf("decoding the old object: %w", err)
	}
	if err := json.Unmarshal(newRaw, &n); err != nil {
		return false, fmt.Errorf("decoding the object: %w", err)
	}
	sameAnn := len(o.Metadata.Annotations) == 0 && len(n.Metadata.Annotations) == 0 ||
		reflect.DeepEqual(o.Metadata.Annotations, n.Metadata.Annotations)
	return sameAnn && reflect.DeepEqual(o.Spec, n.Spec), nil
}

// withoutStatus gives the JSON object raw without its status field.
func withoutStatus(raw []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decoding the object: %w", err)
	}
	if _, ok := obj["status"]; !ok {
		return raw, nil
	}
	delete(obj, "status")
	return json.Marshal(obj)
}
