package graph

import (
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// applyJSONPatch applies the RFC 6902 patch held by the HC annotation ann
// to u, as HCO controllers/operands/operand.go ApplyPatchToSpec: every op
// must target /spec/. HCO patches the typed operand marshalled to JSON,
// where a struct field without a pointer is there as {} even when unset
// (KubeVirt's spec.customizeComponents, CDI's spec.infra, workload and
// customizeComponents): so is u here while the patch applies (typedShape),
// and what stayed {} is taken out again. It reports whether the patch had
// at least one op (which taints the configuration). Errors read like
// HCO's: "invalid jsonPatch in the <ann> annotation: …".
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
	base := u.DeepCopy().Object
	added, err := typedShape(u.GroupVersionKind().GroupKind(), base)
	if err != nil {
		return false, err
	}
	doc, err := json.Marshal(base)
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
	for i := len(added) - 1; i >= 0; i-- { // deepest first
		dropIfEmpty(obj, added[i])
	}
	u.Object = obj
	return true, nil
}

// operandTypes are the operand kinds HCO builds as Go types before it
// patches them, with a constructor of each (HCO controllers/operands
// kubevirt.go NewKubeVirt, cdi.go NewCDI). NetworkAddonsConfig and SSP are
// not modelled: their Go types are not among converge's modules.
var operandTypes = map[schema.GroupKind]func() any{
	{Group: "kubevirt.io", Kind: "KubeVirt"}: func() any { return &kubevirtv1.KubeVirt{} },
	{Group: "cdi.kubevirt.io", Kind: "CDI"}:  func() any { return &cdiv1.CDI{} },
}

// typedShape adds to obj's spec the empty objects that marshalling obj
// as its Go type (operandTypes) would add, and gives their paths (parents
// before children). A kind not in operandTypes is left as it is.
func typedShape(gk schema.GroupKind, obj map[string]any) ([][]string, error) {
	newTyped, ok := operandTypes[gk]
	if !ok {
		return nil, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	typed := newTyped()
	if err := json.Unmarshal(b, typed); err != nil {
		return nil, fmt.Errorf("%s: as HCO's Go type: %w", gk.Kind, err)
	}
	if b, err = json.Marshal(typed); err != nil {
		return nil, err
	}
	shape := map[string]any{}
	if err := json.Unmarshal(b, &shape); err != nil {
		return nil, err
	}
	spec, _ := obj["spec"].(map[string]any)
	shapeSpec, _ := shape["spec"].(map[string]any)
	if spec == nil || shapeSpec == nil {
		return nil, nil
	}
	var added [][]string
	addEmptyObjects(spec, shapeSpec, []string{"spec"}, &added)
	return added, nil
}

// addEmptyObjects adds to dst each key of shape whose value is an empty
// object and that dst lacks, recursing into the objects both have; the
// paths of what it added are appended to added.
func addEmptyObjects(dst, shape map[string]any, path []string, added *[][]string) {
	for k, v := range shape {
		sv, ok := v.(map[string]any)
		if !ok {
			continue
		}
		p := append(append([]string(nil), path...), k)
		switch dv, has := dst[k]; {
		case !has && len(sv) == 0:
			dst[k] = map[string]any{}
			*added = append(*added, p)
		case has:
			if dm, ok := dv.(map[string]any); ok {
				addEmptyObjects(dm, sv, p, added)
			}
		}
	}
}

// dropIfEmpty removes the object at path from obj when it is there and
// empty.
func dropIfEmpty(obj map[string]any, path []string) {
	m := obj
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	last := path[len(path)-1]
	if v, ok := m[last].(map[string]any); ok && len(v) == 0 {
		delete(m, last)
	}
}
