package graph

import (
	"reflect"
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

// TestApplyJSONPatchTypedShape: a patch adds under the struct fields HCO's
// typed operand has as {} when unset (HCO's virt-handler customization
// doc adds /spec/customizeComponents/patches), and the empty objects the
// patch did not fill are not left behind.
func TestApplyJSONPatchTypedShape(t *testing.T) {
	for _, tc := range []struct {
		name, apiVersion, kind, ann, patch string
		want                               map[string]any // spec after the patch
		wantErr                            string
	}{
		{name: "KubeVirt customizeComponents", apiVersion: "kubevirt.io/v1", kind: "KubeVirt", ann: "kubevirt.kubevirt.io/jsonpatch",
			patch: `[{"op":"add","path":"/spec/customizeComponents/patches","value":[{"resourceType":"DaemonSet","resourceName":"virt-handler","patch":"[]","type":"json"}]}]`,
			want: map[string]any{"uninstallStrategy": "BlockUninstallIfWorkloadsExist", "configuration": map[string]any{},
				"customizeComponents": map[string]any{"patches": []any{map[string]any{"resourceType": "DaemonSet", "resourceName": "virt-handler", "patch": "[]", "type": "json"}}}}},
		{name: "KubeVirt patch elsewhere leaves no empty objects", apiVersion: "kubevirt.io/v1", kind: "KubeVirt", ann: "kubevirt.kubevirt.io/jsonpatch",
			patch: `[{"op":"add","path":"/spec/configuration/cpuRequest","value":"100m"}]`,
			want:  map[string]any{"uninstallStrategy": "BlockUninstallIfWorkloadsExist", "configuration": map[string]any{"cpuRequest": "100m"}}},
		{name: "CDI infra", apiVersion: "cdi.kubevirt.io/v1beta1", kind: "CDI", ann: "containerizeddataimporter.kubevirt.io/jsonpatch",
			patch: `[{"op":"add","path":"/spec/infra/nodeSelector","value":{"a":"b"}}]`,
			want:  map[string]any{"uninstallStrategy": "BlockUninstallIfWorkloadsExist", "configuration": map[string]any{}, "infra": map[string]any{"nodeSelector": map[string]any{"a": "b"}}}},
		{name: "CDI workload and customizeComponents", apiVersion: "cdi.kubevirt.io/v1beta1", kind: "CDI", ann: "containerizeddataimporter.kubevirt.io/jsonpatch",
			patch: `[{"op":"add","path":"/spec/workload/nodeSelector","value":{"a":"b"}},{"op":"add","path":"/spec/customizeComponents/flags","value":{"api":{"v":"5"}}}]`,
			want: map[string]any{"uninstallStrategy": "BlockUninstallIfWorkloadsExist", "configuration": map[string]any{},
				"workload": map[string]any{"nodeSelector": map[string]any{"a": "b"}}, "customizeComponents": map[string]any{"flags": map[string]any{"api": map[string]any{"v": "5"}}}}},
		{name: "a path no type has", apiVersion: "kubevirt.io/v1", kind: "KubeVirt", ann: "kubevirt.kubevirt.io/jsonpatch",
			patch: `[{"op":"add","path":"/spec/nothere/x","value":1}]`, wantErr: `missing path: "/spec/nothere/x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": tc.apiVersion, "kind": tc.kind,
				"metadata": map[string]any{"name": "x"},
				"spec":     map[string]any{"uninstallStrategy": "BlockUninstallIfWorkloadsExist", "configuration": map[string]any{}}}}
			_, err := applyJSONPatch(u, tc.ann, tc.patch)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := u.Object["spec"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("spec = %v\nwant   %v", got, tc.want)
			}
			if _, ok := u.Object["status"]; ok {
				t.Errorf("the typed shape leaked a status: %v", u.Object["status"])
			}
		})
	}
}
