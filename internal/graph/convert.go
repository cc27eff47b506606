package graph

import (
	"encoding/json"
	"fmt"
	"maps"

	"cuelang.org/go/cue"
)

// Versions of the HyperConverged API converge serves.
const (
	HCV1      = "hco.kubevirt.io/v1"
	HCV1Beta1 = "hco.kubevirt.io/v1beta1"
	// V1OnlyFieldsAnnotation holds, on the v1beta1 view of an object, the v1
	// fields v1beta1 cannot express (schema #V1OnlyFieldsAnnotation).
	V1OnlyFieldsAnnotation = "hco.kubevirt.io/v1-only-fields"
)

// ConvertHyperConverged takes a stored HyperConverged (an object of either
// version, as the API server sends it to a CRD conversion webhook) and the
// desired apiVersion, and gives the object in that version, as HCO's
// conversion webhook (api/v1beta1/conversion.go): the spec and status are
// converted by the schema's #ToV1 and #ToV1Beta1; metadata is kept as is
// apart from the v1-only-fields annotation, which #ToV1Beta1 writes and the
// conversion to v1 reads back into the spec and removes, so that a
// v1 → v1beta1 → v1 round trip loses nothing. An object already in the
// desired version is returned unchanged. Errors name the object.
func (e *Engine) ConvertHyperConverged(obj map[string]any, apiVersion string) (map[string]any, error) {
	from, _ := obj["apiVersion"].(string)
	if from == apiVersion {
		return obj, nil
	}
	if (from != HCV1 && from != HCV1Beta1) || (apiVersion != HCV1 && apiVersion != HCV1Beta1) {
		return nil, fmt.Errorf("HyperConverged %s: cannot convert %s to %s", objName(obj), from, apiVersion)
	}
	md, _ := obj["metadata"].(map[string]any)
	in := map[string]any{"apiVersion": from, "kind": obj["kind"], "spec": obj["spec"],
		"metadata": map[string]any{"name": md["name"], "namespace": md["namespace"], "annotations": md["annotations"]}}
	if in["spec"] == nil {
		in["spec"] = map[string]any{}
	}
	if md["annotations"] == nil {
		delete(in["metadata"].(map[string]any), "annotations")
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("HyperConverged %s: %w", objName(obj), err)
	}

	defer e.Lock()()
	v := e.ctx.CompileBytes(b, cue.Filename(objName(obj)))
	v = e.def("#ToV1").FillPath(cue.ParsePath("in"), v).LookupPath(cue.ParsePath("out"))
	if apiVersion == HCV1Beta1 {
		v = e.def("#ToV1Beta1").FillPath(cue.ParsePath("in"), v).LookupPath(cue.ParsePath("out"))
	}
	var out map[string]any
	if err := v.Decode(&out); err != nil {
		return nil, Format(fmt.Errorf("HyperConverged %s: converting to %s: %w", objName(obj), apiVersion, err))
	}

	meta := maps.Clone(md)
	outMeta, _ := out["metadata"].(map[string]any)
	ann, _ := outMeta["annotations"].(map[string]any)
	ann = maps.Clone(ann)
	if apiVersion == HCV1 {
		if raw, ok := ann[V1OnlyFieldsAnnotation].(string); ok {
			var kept map[string]any
			if err := json.Unmarshal([]byte(raw), &kept); err != nil {
				return nil, fmt.Errorf("HyperConverged %s: annotation %s: %w", objName(obj), V1OnlyFieldsAnnotation, err)
			}
			spec, _ := out["spec"].(map[string]any)
			if extra, ok := kept["featureGates"].([]any); ok {
				// Gates v1beta1 cannot express, appended to the converted list.
				gates, _ := spec["featureGates"].([]any)
				spec = maps.Clone(spec)
				spec["featureGates"] = append(append([]any{}, gates...), extra...)
				delete(kept, "featureGates")
			}
			out["spec"] = mergeMaps(spec, kept)
			delete(ann, V1OnlyFieldsAnnotation)
		}
	}
	if len(ann) > 0 {
		meta["annotations"] = ann
	} else {
		delete(meta, "annotations")
	}
	out["metadata"] = meta
	if st, ok := obj["status"]; ok {
		out["status"] = st
	}
	return out, nil
}

// mergeMaps returns dst with src merged in: nested maps merge, other values
// from src win.
func mergeMaps(dst, src map[string]any) map[string]any {
	out := maps.Clone(dst)
	if out == nil {
		out = map[string]any{}
	}
	for k, sv := range src {
		sm, sok := sv.(map[string]any)
		dm, dok := out[k].(map[string]any)
		if sok && dok {
			out[k] = mergeMaps(dm, sm)
			continue
		}
		out[k] = sv
	}
	return out
}

func objName(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	return fmt.Sprintf("%v/%v", md["namespace"], md["name"])
}
