package domain

import (
	"encoding/json"
	"fmt"
	"sort"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// DecodeVMI decodes one VirtualMachineInstance from YAML or JSON and
// refuses fields the kubevirt.io/api v1.9.0 types do not have, naming their
// paths. (Strict decoding alone misses them below spec: the VMI spec type
// has its own UnmarshalJSON.) A field set to its zero value (false, 0, "",
// null) is not checked, since the types drop those when re-encoding.
func DecodeVMI(data []byte) (*kubevirtv1.VirtualMachineInstance, error) {
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := yaml.UnmarshalStrict(raw, vmi); err != nil {
		return nil, err
	}
	again, err := json.Marshal(vmi)
	if err != nil {
		return nil, err
	}
	var in, out any
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(again, &out); err != nil {
		return nil, err
	}
	var unknown []string
	unknownFields(&unknown, "", in, out)
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown field %q (not in kubevirt.io/api v1.9.0)", unknown[0])
	}
	return vmi, nil
}

func unknownFields(acc *[]string, path string, in, out any) {
	switch in := in.(type) {
	case map[string]any:
		o, _ := out.(map[string]any)
		for k, v := range in {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ov, ok := o[k]
			if !ok {
				if !isZero(v) {
					*acc = append(*acc, p)
				}
				continue
			}
			unknownFields(acc, p, v, ov)
		}
	case []any:
		o, _ := out.([]any)
		for i, v := range in {
			if i < len(o) {
				unknownFields(acc, fmt.Sprintf("%s[%d]", path, i), v, o[i])
			}
		}
	}
}

func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	case string:
		return v == ""
	case map[string]any:
		for _, x := range v {
			if !isZero(x) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	}
	return false
}
