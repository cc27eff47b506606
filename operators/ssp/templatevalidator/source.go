package templatevalidator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels and annotations the validator reads (upstream labels/labels.go).
const (
	// TemplateNameKey names the VM's template (a label, else an
	// annotation).
	TemplateNameKey = "vm.kubevirt.io/template"
	// TemplateNamespaceKey gives the template's namespace.
	TemplateNamespaceKey = "vm.kubevirt.io/template.namespace"
	// TemplateNamespaceOldKey is the namespace key of older VMs, read when
	// TemplateNamespaceKey is not set.
	TemplateNamespaceOldKey = "vm.kubevirt.io/template-namespace"
	// TemplateValidationsAnnotation holds a Template's rules.
	TemplateValidationsAnnotation = "validations"
	// VMValidationsAnnotation holds a VM's own rules, which replace its
	// template's.
	VMValidationsAnnotation = "vm.kubevirt.io/validations"
	// SkipValidationsAnnotation, present with any value, skips the
	// validation of a VM (upstream: for troubleshooting).
	SkipValidationsAnnotation = "vm.kubevirt.io/skip-validations"
)

// TemplateGVK is the OpenShift Template's kind.
var TemplateGVK = schema.GroupVersionKind{Group: "template.openshift.io", Version: "v1", Kind: "Template"}

// TemplateKey takes a VM's metadata and gives the namespace and name of
// its template: from its labels when they give both, else from its
// annotations (the namespace from TemplateNamespaceKey, else
// TemplateNamespaceOldKey); ok is false when neither gives both (a VM not
// created from a template).
func TemplateKey(obj metav1.Object) (key client.ObjectKey, ok bool) {
	for _, m := range []map[string]string{obj.GetLabels(), obj.GetAnnotations()} {
		ns := m[TemplateNamespaceKey]
		if ns == "" {
			ns = m[TemplateNamespaceOldKey]
		}
		if name := m[TemplateNameKey]; name != "" && ns != "" {
			return client.ObjectKey{Namespace: ns, Name: name}, true
		}
	}
	return client.ObjectKey{}, false
}

// RulesSource takes a client that reads Templates (nil: no Template API)
// and a VM's metadata and gives the rules that apply to it, unparsed, and
// where they come from ("annotation vm.kubevirt.io/validations" or
// "Template <namespace>/<name>"), as upstream webhooks/uplink.go
// getValidationRulesForVM: none when SkipValidationsAnnotation is set;
// the VM's VMValidationsAnnotation when not empty; else the
// TemplateValidationsAnnotation of its template (TemplateKey). A VM
// without template, a template that does not exist, and a cluster
// without the template.openshift.io API give none. The error is for a
// Template that cannot be read otherwise.
func RulesSource(ctx context.Context, r client.Reader, obj metav1.Object) (rules, source string, err error) {
	if _, skip := obj.GetAnnotations()[SkipValidationsAnnotation]; skip {
		return "", "", nil
	}
	if v := obj.GetAnnotations()[VMValidationsAnnotation]; v != "" {
		return v, "annotation " + VMValidationsAnnotation, nil
	}
	key, ok := TemplateKey(obj)
	if !ok || r == nil {
		return "", "", nil
	}
	source = "Template " + key.String()
	t := &unstructured.Unstructured{}
	t.SetGroupVersionKind(TemplateGVK)
	if err := r.Get(ctx, key, t); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return "", "", nil
		}
		return "", source, fmt.Errorf("reading %s: %w", source, err)
	}
	return t.GetAnnotations()[TemplateValidationsAnnotation], source, nil
}
