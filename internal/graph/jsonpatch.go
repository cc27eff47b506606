package graph

import (
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// applyJSONPatch applies the RFC 6902 patch held by the HC annotation ann
// to u, as HCO controllers/operands/operand.go ApplyPatchToSpec: every op
// must target /spec/. It reports whether the patch had at least one op
// (which taints the configuration). Errors read like HCO's:
// "invalid jsonPatch in the <ann> annotation: …".
func applyJSONPatch(u *unstructured.Unstructured, ann, value string) (bool, error) {
	fail := func(format string, args ...any) (bool, error) {
		return false, fmt.Errorf("metadata.annotations.%q: invalid jsonPatch in the %s annotation: %s",
			ann, ann, fmt.Sprintf(format, args...))
	}
	var ops []map[string]any
	if err := json.Unmarshal([]byte(value), &ops); err != nil {
		return fail("%v", err)
	}
	if len(ops) == 0 {
		return false, nil
	}
	for i, op := range ops {
		path, _ := op["path"].(string)
		if !strings.HasPrefix(path, "/spec/") {
			return fail("op %d: path %q: can only modify spec fields", i, path)
		}
	}
	patch, err := jsonpatch.DecodePatch([]byte(value))
	if err != nil {
		return fail("%v", err)
	}
	doc, err := json.Marshal(u.Object)
	if err != nil {
		return false, err
	}
	out, err := patch.Apply(doc)
	if err != nil {
		return fail("%v", err)
	}
	obj := map[string]any{}
	if err := json.Unmarshal(out, &obj); err != nil {
		return false, err
	}
	u.Object = obj
	return true, nil
}
