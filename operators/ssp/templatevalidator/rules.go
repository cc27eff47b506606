package templatevalidator

import (
	"encoding/json"
	"fmt"
	"math"
)

// RuleType is a rule's kind (upstream validation/specialized.go).
type RuleType string

// The rule types.
const (
	// IntegerRule: every value at the path is in [min, max] (either may
	// be absent); quantities count in their base unit ("1Gi" is
	// 1073741824).
	IntegerRule RuleType = "integer"
	// StringRule: every string at the path has a length in [minLength,
	// maxLength].
	StringRule RuleType = "string"
	// EnumRule: every string at the path is one of values.
	EnumRule RuleType = "enum"
	// RegexRule: every string at the path matches regex (Go syntax,
	// unanchored).
	RegexRule RuleType = "regex"
)

// IsValid reports whether r is one of the four rule types.
func (r RuleType) IsValid() bool {
	switch r {
	case IntegerRule, StringRule, EnumRule, RegexRule:
		return true
	}
	return false
}

// IntOrPath is a bound of a rule: an integer, or a path read from the VM.
type IntOrPath struct {
	Int  int64
	Path *Path
}

// StringOrPath is one of an enum rule's values: a string, or a path read
// from the VM when it starts with PathPrefix.
type StringOrPath struct {
	Str  string
	Path *Path
}

// Rule is one entry of a `validations` annotation (upstream
// validation/rules.go Rule).
type Rule struct {
	// Rule, Name, Path and Message are required (Rule and Message are
	// checked at evaluation, as upstream).
	Rule    RuleType
	Name    string
	Path    *Path
	Message string
	// Valid, when set, is a path that must exist on the VM for the rule to
	// apply.
	Valid *Path
	// JustWarning makes a rule that is not met a warning, not a refusal.
	JustWarning bool
	// Values of an enum rule.
	Values []StringOrPath
	// Min and Max of an integer rule.
	Min, Max *IntOrPath
	// MinLength and MaxLength of a string rule.
	MinLength, MaxLength *IntOrPath
	// Regex of a regex rule (compiled at evaluation).
	Regex string
}

// rawRule is a Rule as JSON.
type rawRule struct {
	Rule        RuleType          `json:"rule"`
	Name        string            `json:"name"`
	Path        *string           `json:"path"`
	Message     string            `json:"message"`
	Valid       *string           `json:"valid"`
	JustWarning bool              `json:"justWarning"`
	Values      []json.RawMessage `json:"values"`
	Min         json.RawMessage   `json:"min"`
	Max         json.RawMessage   `json:"max"`
	MinLength   json.RawMessage   `json:"minLength"`
	MaxLength   json.RawMessage   `json:"maxLength"`
	Regex       string            `json:"regex"`
}

// ParseRules takes a `validations` annotation (a JSON list of rules;
// empty gives none) and gives its rules, in order. Unknown keys are
// ignored, as upstream. The error, for a value that is not a JSON list of
// rule objects or a path (path, valid, or min, max, minLength, maxLength,
// values given as paths) that does not parse, names the rule (its index
// and name) and the key, e.g. `rule 1 "minimal-memory": min: invalid
// JSONPath "2Gi": want "jsonpath::" followed by a path ...`; upstream
// gives encoding/json's error alone.
func ParseRules(data string) ([]Rule, error) {
	if data == "" {
		return nil, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(data), &raws); err != nil {
		return nil, fmt.Errorf("not a JSON list of rules: %w", err)
	}
	rules := make([]Rule, 0, len(raws))
	for i, raw := range raws {
		var name struct {
			Name any `json:"name"`
		}
		_ = json.Unmarshal(raw, &name)
		r, err := parseRule(raw)
		if err != nil {
			if name.Name != nil {
				return nil, fmt.Errorf("rule %d %q: %w", i, fmt.Sprint(name.Name), err)
			}
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// parseRule decodes one rule.
func parseRule(raw json.RawMessage) (Rule, error) {
	var rr rawRule
	if err := json.Unmarshal(raw, &rr); err != nil {
		return Rule{}, err
	}
	r := Rule{Rule: rr.Rule, Name: rr.Name, Message: rr.Message, JustWarning: rr.JustWarning, Regex: rr.Regex}
	var err error
	if rr.Path != nil {
		if r.Path, err = ParsePath(*rr.Path); err != nil {
			return Rule{}, fmt.Errorf("path: %w", err)
		}
	}
	if rr.Valid != nil {
		if r.Valid, err = ParsePath(*rr.Valid); err != nil {
			return Rule{}, fmt.Errorf("valid: %w", err)
		}
	}
	for _, b := range []struct {
		key string
		raw json.RawMessage
		to  **IntOrPath
	}{{"min", rr.Min, &r.Min}, {"max", rr.Max, &r.Max}, {"minLength", rr.MinLength, &r.MinLength}, {"maxLength", rr.MaxLength, &r.MaxLength}} {
		if len(b.raw) == 0 || string(b.raw) == "null" {
			continue
		}
		if *b.to, err = parseIntOrPath(b.raw); err != nil {
			return Rule{}, fmt.Errorf("%s: %w", b.key, err)
		}
	}
	for j, v := range rr.Values {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return Rule{}, fmt.Errorf("values[%d]: %w", j, err)
		}
		if !IsPath(s) {
			r.Values = append(r.Values, StringOrPath{Str: s})
			continue
		}
		p, err := ParsePath(s)
		if err != nil {
			return Rule{}, fmt.Errorf("values[%d]: %w", j, err)
		}
		r.Values = append(r.Values, StringOrPath{Path: p})
	}
	return r, nil
}

// parseIntOrPath decodes a number (rounded to an integer, as upstream
// variants.go) or a path.
func parseIntOrPath(raw json.RawMessage) (*IntOrPath, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		return &IntOrPath{Int: int64(math.Round(f))}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("want a number or a %q path, got %s", PathPrefix, raw)
	}
	p, err := ParsePath(s)
	if err != nil {
		return nil, err
	}
	return &IntOrPath{Path: p}, nil
}
