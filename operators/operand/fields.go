package operand

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusFields lays a Report out in an operand kind's own status field
// names: the upstream CRs share conditions and observedGeneration but name
// their phase and versions differently.
type StatusFields struct {
	// Phase is the phase's field ("phase"); "" for a kind without one
	// (NetworkAddonsConfig).
	Phase string
	// OperatorVersion, TargetVersion and ObservedVersion are the version
	// fields' names; "" leaves one out.
	OperatorVersion, TargetVersion, ObservedVersion string
	// Extra, when set, gives further status fields of the kind from the
	// report (KubeVirt's registries).
	Extra func(Report) map[string]any
}

// SDKStatusFields are the fields of the controller-lifecycle-operator-sdk
// status that CDI and HostPathProvisioner share (kubevirt.io/
// controller-lifecycle-operator-sdk api Status): phase, operatorVersion,
// targetVersion, observedVersion.
func SDKStatusFields() StatusFields {
	return StatusFields{Phase: "phase", OperatorVersion: "operatorVersion", TargetVersion: "targetVersion", ObservedVersion: "observedVersion"}
}

// Status gives the status object of r: conditions, observedGeneration and
// the kind's phase, version and extra fields.
func (f StatusFields) Status(r Report) map[string]any {
	out := map[string]any{"conditions": conditionsJSON(r.Conditions), "observedGeneration": r.ObservedGeneration}
	put := func(field, value string) {
		if field != "" && value != "" {
			out[field] = value
		}
	}
	put(f.Phase, r.Phase)
	put(f.OperatorVersion, r.OperatorVersion)
	put(f.TargetVersion, r.TargetVersion)
	put(f.ObservedVersion, r.ObservedVersion)
	if f.Extra != nil {
		for k, v := range f.Extra(r) {
			out[k] = v
		}
	}
	return out
}

// Previous reads what status (a CR's status object, nil if none) said:
// its conditions, observedGeneration and observed version.
func (f StatusFields) Previous(status map[string]any) Previous {
	var p Previous
	if status == nil {
		return p
	}
	if raw, ok := status["conditions"]; ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &p.Conditions)
	}
	switch g := status["observedGeneration"].(type) {
	case int64:
		p.ObservedGeneration = g
	case float64:
		p.ObservedGeneration = int64(g)
	}
	if f.ObservedVersion != "" {
		p.ObservedVersion, _ = status[f.ObservedVersion].(string)
	}
	return p
}

// conditionsJSON gives the conditions as the API stores them: type,
// status, reason, message, lastTransitionTime.
func conditionsJSON(conds []metav1.Condition) []any {
	out := make([]any, 0, len(conds))
	for _, c := range conds {
		m := map[string]any{"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message,
			"lastTransitionTime": c.LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z")}
		out = append(out, m)
	}
	return out
}
