package graph

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestApplyJSONPatch(t *testing.T) {
	const ann = "kubevirt.kubevirt.io/jsonpatch"
	for _, tc := range []struct {
		name, patch string
		applied     bool
		wantErr     string
		check       func(t *testing.T, u *unstructured.Unstructured)
	}{
		{name: "adds under /spec/", patch: `[{"op":"add","path":"/spec/configuration/cpuRequest","value":"100m"}]`, applied: true,
			check: func(t *testing.T, u *unstructured.Unstructured) {
				if v, _, _ := unstructured.NestedString(u.Object, "spec", "configuration", "cpuRequest"); v != "100m" {
					t.Errorf("cpuRequest = %q", v)
				}
			}},
		{name: "empty patch taints nothing", patch: `[]`, applied: false},
		{name: "outside /spec/ is refused", patch: `[{"op":"add","path":"/metadata/labels/x","value":"y"}]`,
			wantErr: "invalid jsonPatch in the kubevirt.kubevirt.io/jsonpatch annotation: op 0: path \"/metadata/labels/x\": can only modify spec fields"},
		{name: "not JSON", patch: `{`, wantErr: "invalid jsonPatch in the kubevirt.kubevirt.io/jsonpatch annotation"},
		{name: "a failing test op", patch: `[{"op":"test","path":"/spec/a","value":2}]`, wantErr: "invalid jsonPatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"kind": "KubeVirt", "spec": map[string]any{"a": int64(1), "configuration": map[string]any{}}}}
			applied, err := applyJSONPatch(u, ann, tc.patch)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if applied != tc.applied {
				t.Errorf("applied = %v, want %v", applied, tc.applied)
			}
			if tc.check != nil {
				tc.check(t, u)
			}
		})
	}
}
