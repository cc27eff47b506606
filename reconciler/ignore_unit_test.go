package reconciler

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestWithIgnored(t *testing.T) {
	desired := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "d", "annotations": map[string]any{"a/b": "x"}},
			"spec":     map[string]any{"replicas": int64(1), "paused": false},
		}}
	}
	live := func(mgr string, op metav1.ManagedFieldsOperationType, fields string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{"a/b": "live"}},
			"spec":     map[string]any{"replicas": int64(5)},
		}}
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: mgr, Operation: op, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}})
		return u
	}
	for _, tc := range []struct {
		name  string
		live  *unstructured.Unstructured
		paths []string
		want  map[string]any // spec after
		ann   any            // metadata.annotations after (nil: absent)
		err   string
	}{
		{"another manager owns replicas: left out", live("hpa", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:replicas":{}}}`),
			[]string{"/spec/replicas"}, map[string]any{"paused": false}, map[string]any{"a/b": "x"}, ""},
		{"only converge owns it: the live value", live(FieldManager, metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:replicas":{}}}`),
			[]string{"/spec/replicas"}, map[string]any{"replicas": int64(5), "paused": false}, map[string]any{"a/b": "x"}, ""},
		{"absent on live: left out", live("hpa", metav1.ManagedFieldsOperationUpdate, `{}`),
			[]string{"/spec/paused"}, map[string]any{"replicas": int64(1)}, map[string]any{"a/b": "x"}, ""},
		{"escaped key owned by another: empty map removed too", live("kubectl", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:annotations":{"f:a/b":{}}}}`),
			[]string{"/metadata/annotations/a~1b"}, map[string]any{"replicas": int64(1), "paused": false}, nil, ""},
		{"subtree owned below the path", live("hpa", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:replicas":{}}}`),
			[]string{"/spec"}, nil, map[string]any{"a/b": "x"}, ""},
		{"malformed path", live("hpa", metav1.ManagedFieldsOperationUpdate, `{}`),
			[]string{"spec/replicas"}, nil, nil, `Deployment/d: ignore rule: path "spec/replicas"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := desired()
			got, err := withIgnored(d, tc.live, tc.paths)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec, _, _ := unstructured.NestedMap(got.Object, "spec")
			if !reflect.DeepEqual(spec, tc.want) && !(spec == nil && tc.want == nil) {
				t.Errorf("spec = %v, want %v", spec, tc.want)
			}
			ann, found, _ := unstructured.NestedFieldNoCopy(got.Object, "metadata", "annotations")
			if tc.ann == nil && found || tc.ann != nil && !reflect.DeepEqual(ann, tc.ann) {
				t.Errorf("annotations = %v (found %v), want %v", ann, found, tc.ann)
			}
			if !reflect.DeepEqual(d, desired()) {
				t.Error("desired was modified")
			}
		})
	}
}
