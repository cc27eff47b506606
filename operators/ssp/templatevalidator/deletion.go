package templatevalidator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TemplateTypeLabel marks a common template (ssp-operator
// internal/operands/common-templates constants.go TemplateTypeLabel); the
// deletion hook is sent only templates labelled base.
const TemplateTypeLabel = "template.kubevirt.io/type"

// TemplateDeletion is the admission handler of template.openshift.io/v1
// Template deletions.
type TemplateDeletion struct {
	// VMs lists kubevirt.io/v1 VirtualMachines (unstructured) in every
	// namespace, at each deletion of a common template with rules; nil:
	// every deletion is allowed.
	VMs client.Reader
}

var _ ctrladmission.Handler = TemplateDeletion{}

// Handle takes an AdmissionReview request for a Template and gives, as
// upstream webhooks/hook.go admitTemplate:
//   - allowed, for operations other than DELETE, a template without
//     TemplateTypeLabel (not a common template) and one without the
//     TemplateValidationsAnnotation (no rules a VM could be validated
//     against);
//   - denied with code 403, reason Forbidden and SSP's message
//     "Template cannot be deleted, because the following VMs are
//     referencing it for validation: <namespace/name, …>" when a VM
//     validates against it: one whose TemplateKey names it and that has
//     no VMValidationsAnnotation of its own (virtinformers
//     vmNeedsTemplate);
//   - an error (400) when the old object does not decode, (500) when the
//     VMs cannot be listed.
func (d TemplateDeletion) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	if req.Operation != admissionv1.Delete || d.VMs == nil {
		return ctrladmission.Allowed("")
	}
	t := &unstructured.Unstructured{}
	if err := json.Unmarshal(req.OldObject.Raw, &t.Object); err != nil {
		return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("Template %s/%s: decoding: %w", req.Namespace, req.Name, err))
	}
	if _, ok := t.GetLabels()[TemplateTypeLabel]; !ok {
		return ctrladmission.Allowed("")
	}
	if _, ok := t.GetAnnotations()[TemplateValidationsAnnotation]; !ok {
		return ctrladmission.Allowed("")
	}
	vms, err := VMsOf(ctx, d.VMs, client.ObjectKey{Namespace: t.GetNamespace(), Name: t.GetName()})
	if err != nil {
		return ctrladmission.Errored(http.StatusInternalServerError, fmt.Errorf("Template %s/%s: %w", t.GetNamespace(), t.GetName(), err))
	}
	if len(vms) == 0 {
		return ctrladmission.Allowed("")
	}
	return ctrladmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
			Message: "Template cannot be deleted, because the following VMs are referencing it for validation: " + strings.Join(vms, ", ")},
	}}
}

// VMsOf lists the VirtualMachines through r and gives, sorted, the
// "namespace/name" of those that validate against the template key: its
// TemplateKey and no VMValidationsAnnotation (upstream virtinformers
// vmNeedsTemplate, vmCache GetVmsForTemplate).
func VMsOf(ctx context.Context, r client.Reader, key client.ObjectKey) ([]string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("kubevirt.io/v1")
	list.SetKind("VirtualMachineList")
	if err := r.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing the VirtualMachines: %w", err)
	}
	var out []string
	for i := range list.Items {
		vm := &list.Items[i]
		if _, own := vm.GetAnnotations()[VMValidationsAnnotation]; own {
			continue
		}
		if k, ok := TemplateKey(vm); ok && k == key {
			out = append(out, vm.GetNamespace()+"/"+vm.GetName())
		}
	}
	sort.Strings(out)
	return out, nil
}
