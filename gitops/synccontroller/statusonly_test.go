package synccontroller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestStatusOnly(t *testing.T) {
	kv := schema.GroupKind{Group: "kubevirt.io", Kind: "KubeVirt"}
	meta := func(gen int64, mutate func(*metav1.PartialObjectMetadata)) *metav1.PartialObjectMetadata {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "kv", Generation: gen, ResourceVersion: "7",
			Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "1"}, Finalizers: []string{"f"}}}
		if mutate != nil {
			mutate(o)
		}
		return o
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name     string
		gk       schema.GroupKind
		old, cur *metav1.PartialObjectMetadata
		want     bool
	}{
		{"custom resource, status write", kv, meta(3, nil), meta(3, func(o *metav1.PartialObjectMetadata) { o.ResourceVersion = "8" }), true},
		{"custom resource, spec change", kv, meta(3, nil), meta(4, nil), false},
		{"label added", kv, meta(3, nil), meta(3, func(o *metav1.PartialObjectMetadata) { o.Labels["team"] = "x" }), false},
		{"annotation changed", kv, meta(3, nil), meta(3, func(o *metav1.PartialObjectMetadata) { o.Annotations["a"] = "2" }), false},
		{"finalizer removed", kv, meta(3, nil), meta(3, func(o *metav1.PartialObjectMetadata) { o.Finalizers = nil }), false},
		{"owner reference added", kv, meta(3, nil), meta(3, func(o *metav1.PartialObjectMetadata) {
			o.OwnerReferences = []metav1.OwnerReference{{Name: "hc", UID: types.UID("u")}}
		}), false},
		{"deletion begun", kv, meta(3, nil), meta(3, func(o *metav1.PartialObjectMetadata) { o.DeletionTimestamp = &now }), false},
		{"no generation", kv, meta(0, nil), meta(0, nil), false},
		{"Deployment status", schema.GroupKind{Group: "apps", Kind: "Deployment"}, meta(2, nil), meta(2, nil), true},
		{"ConfigMap: its generation says nothing", schema.GroupKind{Kind: "ConfigMap"}, meta(1, nil), meta(1, nil), false},
		{"built-in *.k8s.io kind", schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}, meta(1, nil), meta(1, nil), false},
		{"no old object", kv, nil, meta(3, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusOnly(tc.gk, tc.old, tc.cur); got != tc.want {
				t.Errorf("statusOnly = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWakes(t *testing.T) {
	s := types.NamespacedName{Namespace: "converge", Name: "local"}
	for _, tc := range []struct {
		name  string
		marks []bool // statusOnly of each mark
		want  bool
	}{
		{"no mark: a requeue or the Sync's own event", nil, false},
		{"one status-only change", []bool{true}, true},
		{"two status-only changes", []bool{true, true}, true},
		{"a status-only change and a push", []bool{true, false}, false},
		{"a push then a status-only change", []bool{false, true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWakes()
			for _, m := range tc.marks {
				w.mark(s, m)
			}
			if got := w.take(s); got != tc.want {
				t.Errorf("take = %v, want %v", got, tc.want)
			}
			if w.take(s) {
				t.Error("a second take still found status-only marks")
			}
		})
	}
}
