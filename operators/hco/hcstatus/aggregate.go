// Package hcstatus computes the HyperConverged's status conditions from
// its operands' conditions, as HCO controllers/hyperconverged/
// hyperconverged_controller.go and controllers/operands/operand.go do.
// Pure functions: the caller reads the operands and writes the status.
package hcstatus

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types on the HyperConverged (HCO api/v1beta1 conditions).
const (
	ReconcileComplete    = "ReconcileComplete"
	Available            = "Available"
	Progressing          = "Progressing"
	Degraded             = "Degraded"
	Upgradeable          = "Upgradeable"
	TaintedConfiguration = "TaintedConfiguration"
)

// Operand is one operand CR's kind and current conditions.
type Operand struct {
	Kind string
	// Name is the operand's "<name>" or "<namespace>/<name>", for
	// messages (Assess); Aggregate does not use it.
	Name       string
	Conditions []metav1.Condition
	// Generation is the operand's metadata.generation and
	// ObservedGeneration its status.observedGeneration (0 when the
	// operand's operator does not write one): Assess takes conditions
	// written for an older generation as not ready yet; Aggregate does
	// not use them (HCO does not).
	Generation, ObservedGeneration int64
}

// Input is everything the aggregation looks at.
type Input struct {
	// Operands in HCO's handler order; the last to report a condition wins.
	Operands []Operand
	// ReconcileError is the error of this reconcile (fetch, render, apply,
	// prune), nil on success.
	ReconcileError error
	// Tainted lists the jsonpatch annotations in effect.
	Tainted []string
	// Generation is the HC's metadata.generation.
	Generation int64
}

// Aggregate returns the HC conditions for in: ReconcileComplete,
// Available, Progressing, Degraded, Upgradeable, and TaintedConfiguration
// while a jsonpatch annotation is in effect. lastTransitionTime is left
// zero; Merge keeps or sets it.
func Aggregate(in Input) []metav1.Condition {
	rec := map[string]metav1.Condition{}
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		rec[t] = metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
	}
	for _, op := range in.Operands {
		observeOperand(op, rec, set)
	}
	out := map[string]metav1.Condition{}
	put := func(t string, s metav1.ConditionStatus, reason, msg string) {
		if c, ok := rec[t]; ok {
			out[t] = c
			return
		}
		out[t] = metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
	}
	if in.ReconcileError != nil {
		out[ReconcileComplete] = metav1.Condition{Type: ReconcileComplete, Status: metav1.ConditionFalse,
			Reason: "ReconcileFailed", Message: fmt.Sprintf("Error while reconciling: %v", in.ReconcileError)}
	} else {
		out[ReconcileComplete] = metav1.Condition{Type: ReconcileComplete, Status: metav1.ConditionTrue,
			Reason: "ReconcileCompleted", Message: "Reconcile completed successfully"}
	}
	const ok = "ReconcileCompleted"
	switch {
	case has(rec, Degraded):
		put(Degraded, metav1.ConditionTrue, ok, "")
		put(Progressing, metav1.ConditionFalse, ok, "Reconcile completed successfully")
		put(Upgradeable, metav1.ConditionFalse, "HCODegraded", "HCO is not Upgradeable due to degraded components")
		put(Available, metav1.ConditionFalse, "HCODegraded", "HCO is not available due to degraded components")
	case has(rec, Progressing):
		put(Degraded, metav1.ConditionFalse, ok, "Reconcile completed successfully")
		put(Progressing, metav1.ConditionTrue, ok, "")
		put(Upgradeable, metav1.ConditionFalse, "HCOProgressing", "HCO is not Upgradeable due to progressing components")
		put(Available, metav1.ConditionTrue, ok, "Reconcile completed successfully")
	default:
		put(Degraded, metav1.ConditionFalse, ok, "Reconcile completed successfully")
		put(Progressing, metav1.ConditionFalse, ok, "Reconcile completed successfully")
		put(Upgradeable, metav1.ConditionTrue, ok, "Reconcile completed successfully")
		put(Available, metav1.ConditionTrue, ok, "Reconcile completed successfully")
	}
	if len(in.Tainted) > 0 {
		out[TaintedConfiguration] = metav1.Condition{Type: TaintedConfiguration, Status: metav1.ConditionTrue,
			Reason: "UnsupportedFeatureAnnotation", Message: "Unsupported feature was activated via an HCO annotation"}
	}
	var list []metav1.Condition
	for _, t := range []string{ReconcileComplete, Available, Progressing, Degraded, Upgradeable, TaintedConfiguration} {
		if c, ok := out[t]; ok {
			c.ObservedGeneration = in.Generation
			list = append(list, c)
		}
	}
	return list
}

func has(m map[string]metav1.Condition, t string) bool { _, ok := m[t]; return ok }

// observeOperand records the negative observations of one operand, as
// HCO controllers/operands/generic_operand.go handleComponentConditions.
func observeOperand(op Operand, rec map[string]metav1.Condition, set func(string, metav1.ConditionStatus, string, string)) {
	k := op.Kind
	if len(op.Conditions) == 0 {
		msg := fmt.Sprintf("%s resource has no conditions", k)
		set(Available, metav1.ConditionFalse, k+"Conditions", msg)
		set(Progressing, metav1.ConditionTrue, k+"Conditions", msg)
		set(Upgradeable, metav1.ConditionFalse, k+"Conditions", msg)
		return
	}
	foundAvailable := false
	for _, c := range op.Conditions {
		switch {
		case c.Type == Available:
			foundAvailable = true
			if c.Status == metav1.ConditionFalse {
				set(Available, metav1.ConditionFalse, k+"NotAvailable", fmt.Sprintf("%s is not available: %s", k, c.Message))
			}
		case c.Type == Progressing && c.Status == metav1.ConditionTrue:
			set(Progressing, metav1.ConditionTrue, k+"Progressing", fmt.Sprintf("%s is progressing: %s", k, c.Message))
			if !has(rec, Upgradeable) {
				set(Upgradeable, metav1.ConditionFalse, k+"Progressing", fmt.Sprintf("%s is progressing: %s", k, c.Message))
			}
		case c.Type == Degraded && c.Status == metav1.ConditionTrue:
			set(Degraded, metav1.ConditionTrue, k+"Degraded", fmt.Sprintf("%s is degraded: %s", k, c.Message))
		case c.Type == Upgradeable && c.Status == metav1.ConditionFalse:
			set(Upgradeable, metav1.ConditionFalse, k+"NotUpgradeable", fmt.Sprintf("%s is not upgradeable: %s", k, c.Message))
		}
	}
	if !foundAvailable {
		set(Available, metav1.ConditionFalse, k+"NotAvailable", fmt.Sprintf("%s is not available: the Available condition is missing", k))
	}
}

// Merge sets each of desired on current (keeping lastTransitionTime when
// a condition's status is unchanged, setting now otherwise) and removes
// TaintedConfiguration when desired has none. It reports whether current
// changed.
func Merge(current *[]metav1.Condition, desired []metav1.Condition, now metav1.Time) bool {
	changed := false
	want := map[string]bool{}
	for _, c := range desired {
		want[c.Type] = true
		c.LastTransitionTime = now
		if meta.SetStatusCondition(current, c) {
			changed = true
		}
	}
	if !want[TaintedConfiguration] && meta.RemoveStatusCondition(current, TaintedConfiguration) {
		changed = true
	}
	return changed
}

// SystemHealth returns HCO's status.systemHealthStatus for conditions:
// "error" when not Available or Degraded, "warning" when the reconcile did
// not complete or something is progressing, else "healthy".
func SystemHealth(conds []metav1.Condition) string {
	switch {
	case !meta.IsStatusConditionTrue(conds, Available) || meta.IsStatusConditionTrue(conds, Degraded):
		return "error"
	case !meta.IsStatusConditionTrue(conds, ReconcileComplete) || meta.IsStatusConditionTrue(conds, Progressing):
		return "warning"
	}
	return "healthy"
}
