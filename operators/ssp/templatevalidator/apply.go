package templatevalidator

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// apply applies one well-formed rule to vm (paths missing there read from
// ref) and reports whether it is met, and upstream's text for what was
// found (validation/specialized.go, the String methods of intRule,
// stringRule, enumRule and regexRule). The error is for a bound or value
// that cannot be read, no values at the path, or a regex that does not
// compile.
func apply(r *Rule, vm, ref *kubevirtv1.VirtualMachine) (bool, string, error) {
	switch r.Rule {
	case IntegerRule:
		return applyInt(r, vm, ref)
	case StringRule:
		return applyString(r, vm, ref)
	case EnumRule:
		return applyEnum(r, vm, ref)
	case RegexRule:
		return applyRegex(r, vm, ref)
	}
	return false, "", ErrUnrecognizedRuleType
}

// bounds is an interval whose ends may be absent (upstream Range).
type bounds struct {
	min, max       int64
	minSet, maxSet bool
}

// decodeBounds reads min and max (either may be nil).
func decodeBounds(min, max *IntOrPath, vm, ref *kubevirtv1.VirtualMachine) (bounds, error) {
	var b bounds
	var err error
	if min != nil {
		if b.min, err = decodeInt(min, vm, ref); err != nil {
			return b, err
		}
		b.minSet = true
	}
	if max != nil {
		if b.max, err = decodeInt(max, vm, ref); err != nil {
			return b, err
		}
		b.maxSet = true
	}
	return b, nil
}

func (b bounds) includes(v int64) bool {
	return (!b.minSet || v >= b.min) && (!b.maxSet || v <= b.max)
}

// strings gives the bounds as upstream prints them: "N/A" when absent.
func (b bounds) strings() (string, string) {
	lo, hi := "N/A", "N/A"
	if b.minSet {
		lo = strconv.FormatInt(b.min, 10)
	}
	if b.maxSet {
		hi = strconv.FormatInt(b.max, 10)
	}
	return lo, hi
}

// decodeInt gives an integer bound, or the one value at its path.
func decodeInt(ip *IntOrPath, vm, ref *kubevirtv1.VirtualMachine) (int64, error) {
	if ip.Path == nil {
		return ip.Int, nil
	}
	v, err := ip.Path.ints(vm, ref)
	if err != nil {
		return 0, err
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("expected one value, found %v", len(v))
	}
	return v[0], nil
}

// applyInt: every value in [min, max]. Not met, the text is one
// "value %v is lower than minimum [%s]" or "value %v is higher than
// maximum [%s]" per value out of range, joined by ", " (upstream also
// puts a ", " after each value in range).
func applyInt(r *Rule, vm, ref *kubevirtv1.VirtualMachine) (bool, string, error) {
	b, err := decodeBounds(r.Min, r.Max, vm, ref)
	if err != nil {
		return false, "", err
	}
	vals, err := r.Path.ints(vm, ref)
	if err != nil {
		return false, "", err
	}
	if len(vals) == 0 {
		return false, "", ErrNoValuesFound
	}
	lo, hi := b.strings()
	var msgs []string
	for _, v := range vals {
		if b.minSet && v < b.min {
			msgs = append(msgs, fmt.Sprintf("value %v is lower than minimum [%s]", v, lo))
		}
		if b.maxSet && v > b.max {
			msgs = append(msgs, fmt.Sprintf("value %v is higher than maximum [%s]", v, hi))
		}
	}
	if len(msgs) == 0 {
		return true, fmt.Sprintf("All values %v are in interval [%s, %s]", vals, lo, hi), nil
	}
	return false, strings.Join(msgs, ", "), nil
}

// applyString: every string's length (in bytes, as upstream) in
// [minLength, maxLength].
func applyString(r *Rule, vm, ref *kubevirtv1.VirtualMachine) (bool, string, error) {
	b, err := decodeBounds(r.MinLength, r.MaxLength, vm, ref)
	if err != nil {
		return false, "", err
	}
	vals, err := r.Path.strs(vm, ref)
	if err != nil {
		return false, "", err
	}
	if len(vals) == 0 {
		return false, "", ErrNoValuesFound
	}
	lo, hi := b.strings()
	for _, v := range vals {
		if !b.includes(int64(len(v))) {
			return false, fmt.Sprintf("Lengths of some strings are not in interval [%s, %s]", lo, hi), nil
		}
	}
	return true, fmt.Sprintf("Lengths of all strings are in interval [%s, %s]", lo, hi), nil
}

// applyEnum: every string one of the values.
func applyEnum(r *Rule, vm, ref *kubevirtv1.VirtualMachine) (bool, string, error) {
	var allowed []string
	for _, v := range r.Values {
		if v.Path == nil {
			allowed = append(allowed, v.Str)
			continue
		}
		ss, err := v.Path.strs(vm, ref)
		if err != nil {
			return false, "", err
		}
		if len(ss) != 1 {
			return false, "", fmt.Errorf("expected one value, found %v", len(ss))
		}
		allowed = append(allowed, ss[0])
	}
	vals, err := r.Path.strs(vm, ref)
	if err != nil {
		return false, "", err
	}
	if len(vals) == 0 {
		return false, "", ErrNoValuesFound
	}
	cur, all := strings.Join(vals, ", "), strings.Join(allowed, ", ")
	for _, v := range vals {
		found := false
		for _, a := range allowed {
			found = found || v == a
		}
		if !found {
			return false, fmt.Sprintf("Some of [%s] are not in [%s]", cur, all), nil
		}
	}
	return true, fmt.Sprintf("All [%s] are in [%s]", cur, all), nil
}

// applyRegex: every string matches the regex (unanchored).
func applyRegex(r *Rule, vm, ref *kubevirtv1.VirtualMachine) (bool, string, error) {
	re, err := regexp.Compile(r.Regex)
	if err != nil {
		return false, "", err
	}
	vals, err := r.Path.strs(vm, ref)
	if err != nil {
		return false, "", err
	}
	if len(vals) == 0 {
		return false, "", ErrNoValuesFound
	}
	cur := strings.Join(vals, ", ")
	for _, v := range vals {
		if !re.MatchString(v) {
			return false, fmt.Sprintf("Some of [%s] do not match %s", cur, re), nil
		}
	}
	return true, fmt.Sprintf("All [%s] match %s", cur, re), nil
}
