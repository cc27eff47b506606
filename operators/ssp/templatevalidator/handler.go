package templatevalidator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/converge-dev/converge/internal/webhook"
)

// Validator is the admission handler of kubevirt.io/v1 VirtualMachines.
type Validator struct {
	// Templates reads template.openshift.io/v1 Templates (unstructured),
	// at each request; nil: only a VM's own rules apply.
	Templates client.Reader
}

var _ ctrladmission.Handler = Validator{}

// Handle takes an AdmissionReview request for a VirtualMachine and gives
// (upstream webhooks/hook.go admitVm):
//   - allowed, for operations other than CREATE and UPDATE, a VM being
//     deleted (deletionTimestamp set) and a VM without rules
//     (RulesSource);
//   - allowed with a warning per justWarning rule not met, when Evaluate
//     succeeds;
//   - denied with code 422, reason Invalid, Result.Message
//     (`<rule message>: <what>`, joined by ", ") and the causes, when it
//     does not;
//   - an error (400) naming the VM and where its rules come from when
//     the VM or the rules do not decode (a malformed rule refuses every
//     VM of its template, as upstream), and (500) when the Template
//     cannot be read.
//
// UPDATEs are checked in full, as upstream.
func (v Validator) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return ctrladmission.Allowed("")
	}
	what := "VirtualMachine " + req.Namespace + "/" + webhook.RequestName(req)
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(req.Object.Raw, vm); err != nil {
		return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: decoding: %w", what, err))
	}
	if vm.DeletionTimestamp != nil {
		return ctrladmission.Allowed("being deleted")
	}
	raw, source, err := RulesSource(ctx, v.Templates, vm)
	if err != nil {
		return ctrladmission.Errored(http.StatusInternalServerError, fmt.Errorf("%s: %w", what, err))
	}
	rules, err := ParseRules(raw)
	if err != nil {
		return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: the validation rules of %s: %w", what, source, err))
	}
	if len(rules) == 0 {
		return ctrladmission.Allowed("")
	}
	res := Evaluate(rules, vm)
	if res.Succeeded() {
		return ctrladmission.Allowed("").WithWarnings(res.Warnings()...)
	}
	return Denied(res).WithWarnings(res.Warnings()...)
}

// Denied gives the denial of a result that did not succeed, as upstream
// webhooks/utils.go ToAdmissionResponse: code 422, reason Invalid,
// message Result.Message, details the causes. The API server prefixes
// the message with `admission webhook "<name>" denied the request: `.
func Denied(res *Result) ctrladmission.Response {
	return ctrladmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{Status: metav1.StatusFailure, Message: res.Message(), Reason: metav1.StatusReasonInvalid,
			Code: http.StatusUnprocessableEntity, Details: &metav1.StatusDetails{Causes: res.Causes()}},
	}}
}
