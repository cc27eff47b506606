package templatevalidator

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/jsonpath"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// PathPrefix starts every path of a rule (path, valid, and min, max,
// minLength, maxLength or values when they are paths).
const PathPrefix = "jsonpath::"

// ErrInvalidJSONPath is upstream's error for a path that does not parse
// or is found neither on the VM nor on the reference VM
// (validation/path/path.go ErrInvalidJSONPath).
var ErrInvalidJSONPath = errors.New("invalid JSONPath")

// Path is a rule's JSONPath, relative to the VM's spec.template:
// "jsonpath::.spec.domain.cpu.cores" reads
// {.spec.template.spec.domain.cpu.cores} of the VM (upstream
// validation/path/path.go). A Path is not safe for concurrent use.
type Path struct {
	expr string
	jp   *jsonpath.JSONPath
}

// IsPath reports whether s starts with PathPrefix.
func IsPath(s string) bool { return strings.HasPrefix(s, PathPrefix) }

// ParsePath takes a rule's path ("jsonpath::" and a path, a leading "$"
// allowed) and gives it parsed. The error, wrapping ErrInvalidJSONPath,
// quotes s: when it lacks PathPrefix or client-go's JSONPath parser
// refuses it.
func ParsePath(s string) (*Path, error) {
	if !IsPath(s) {
		return nil, fmt.Errorf("%w %q: want %q followed by a path such as .spec.domain.cpu.cores", ErrInvalidJSONPath, s, PathPrefix)
	}
	expr := strings.TrimPrefix(strings.TrimPrefix(s, PathPrefix), "$")
	jp := jsonpath.New(s)
	if err := jp.Parse("{.spec.template" + expr + "}"); err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidJSONPath, s, err)
	}
	return &Path{expr: expr, jp: jp}, nil
}

// Expr gives the path without its prefix, e.g. ".spec.domain.cpu.cores"
// (the field of a denial's causes).
func (p *Path) Expr() string {
	if p == nil {
		return ""
	}
	return p.expr
}

// String gives the path as a rule writes it.
func (p *Path) String() string { return PathPrefix + p.Expr() }

// find gives the values at p on vm. Nil pointers at the end of the path
// count as absent: unlike upstream (which would then call AsInt64 on a
// nil *Quantity), a path whose every value is nil gives the same error as
// a nil pointer on the way, so that it is read from the reference VM.
func (p *Path) find(vm *kubevirtv1.VirtualMachine) ([]reflect.Value, error) {
	res, err := p.jp.FindResults(vm)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrInvalidJSONPath, p.expr, err)
	}
	var vals []reflect.Value
	found := 0
	for _, r := range res {
		for _, v := range r {
			found++
			if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
				continue
			}
			vals = append(vals, v)
		}
	}
	if found > 0 && len(vals) == 0 {
		return nil, fmt.Errorf("%w %s: not set", ErrInvalidJSONPath, p.expr)
	}
	return vals, nil
}

// findOnVMOrRef gives the values at p on vm, or, when vm lacks the path
// (an optional field not set), on ref, the zero-value reference VM; the
// error is ref's (upstream specialized.go findPathOnVmOrRef).
func (p *Path) findOnVMOrRef(vm, ref *kubevirtv1.VirtualMachine) ([]reflect.Value, error) {
	if vals, err := p.find(vm); err == nil {
		return vals, nil
	}
	return p.find(ref)
}

// ints gives p's values on vm (or ref) as integers: Go integers, floats
// (rounded) and resource.Quantity ("1Gi" is 1073741824), as upstream
// Results.AsInt64.
func (p *Path) ints(vm, ref *kubevirtv1.VirtualMachine) ([]int64, error) {
	vals, err := p.findOnVMOrRef(vm, ref)
	if err != nil {
		return nil, err
	}
	out := make([]int64, 0, len(vals))
	for _, v := range vals {
		v = reflect.Indirect(v)
		var i int64
		ok := v.CanInterface()
		if ok {
			i, ok = toInt64(v.Interface())
		}
		if !ok {
			return nil, fmt.Errorf("mismatching type: %v, not int or resource.Quantity", v.Type())
		}
		out = append(out, i)
	}
	return out, nil
}

// strs gives p's values on vm (or ref) as strings: strings and types
// defined as strings (such as a disk's bus). Upstream
// (Results.AsString) turns any other value into reflect's "<T Value>";
// converge refuses it with upstream's "mismatching type" error instead.
func (p *Path) strs(vm, ref *kubevirtv1.VirtualMachine) ([]string, error) {
	vals, err := p.findOnVMOrRef(vm, ref)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		v = reflect.Indirect(v)
		if v.Kind() == reflect.Interface {
			v = v.Elem()
		}
		if v.Kind() != reflect.String {
			return nil, fmt.Errorf("mismatching type: %v, not string", v.Type())
		}
		out = append(out, v.String())
	}
	return out, nil
}

// toInt64 converts upstream's numeric types (validation/path/conv.go)
// and resource.Quantity values that fit an int64.
func toInt64(obj any) (int64, bool) {
	switch v := obj.(type) {
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		return int64(v), true
	case float32:
		return int64(math.Round(float64(v))), true
	case float64:
		return int64(math.Round(v)), true
	case resource.Quantity:
		return v.AsInt64()
	}
	return 0, false
}
