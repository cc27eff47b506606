package webhook

import (
	"context"
	"encoding/base64"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Inject takes a client, a target, a PEM CA bundle and a field manager,
// and makes the target trust the bundle: every webhook's
// clientConfig.caBundle of a webhook configuration, the conversion
// webhook's of a CRD, or an APIService's spec.caBundle. It patches with server-side apply (forcing
// ownership of the caBundle fields only) and only when a value differs.
// It gives whether it patched; a target that does not exist, is being
// deleted, or (a CRD) does not convert by webhook is left alone. It does
// the job of cert-controller's ReconcileWH.ensureCerts and cert-manager's
// cainjector.
//
// The field manager co-owns each webhook entry it patches, so an owner
// that later drops a webhook entry from its applied configuration must
// delete the entry itself (server-side apply keeps items another manager
// owns fields in).
func Inject(ctx context.Context, c client.Client, t Target, bundle []byte, fieldOwner string) (bool, error) {
	obj := &unstructured.Unstructured{}
	gvk := t.gvk()
	obj.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, client.ObjectKey{Name: t.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("webhookcert: reading %s %s: %w", t.Kind, t.Name, err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	want := base64.StdEncoding.EncodeToString(bundle)
	patch := &unstructured.Unstructured{}
	patch.SetGroupVersionKind(gvk)
	patch.SetName(t.Name)
	var changed bool
	switch t.Kind {
	case ValidatingWebhook, MutatingWebhook:
		hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		var entries []any
		for _, h := range hooks {
			m, _ := h.(map[string]any)
			name, _ := m["name"].(string)
			have, _, _ := unstructured.NestedString(m, "clientConfig", "caBundle")
			changed = changed || have != want
			entries = append(entries, map[string]any{"name": name, "clientConfig": map[string]any{"caBundle": want}})
		}
		patch.Object["webhooks"] = entries
	case CRDConversion:
		if s, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "strategy"); s != "Webhook" {
			return false, nil
		}
		have, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
		changed = have != want
		_ = unstructured.SetNestedField(patch.Object, want, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	case APIService:
		have, _, _ := unstructured.NestedString(obj.Object, "spec", "caBundle")
		changed = have != want
		_ = unstructured.SetNestedField(patch.Object, want, "spec", "caBundle")
	default:
		return false, fmt.Errorf("webhookcert: unknown target kind %q", t.Kind)
	}
	if !changed {
		return false, nil
	}
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(patch), client.FieldOwner(fieldOwner), client.ForceOwnership)
	if err != nil {
		return false, fmt.Errorf("webhookcert: injecting the CA bundle into %s %s: %w", t.Kind, t.Name, err)
	}
	return true, nil
}

func (t Target) gvk() schema.GroupVersionKind {
	switch t.Kind {
	case CRDConversion:
		return schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: string(t.Kind)}
	case APIService:
		return schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: string(t.Kind)}
	}
	return schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: string(t.Kind)}
}
