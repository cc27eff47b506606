package hcstatus

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Readiness is one operand's state as HCO judges it.
type Readiness string

// Readiness values.
const (
	// Ready: Available=True and Degraded not True.
	Ready Readiness = "Ready"
	// NotReady: no conditions yet, or Available missing or not True.
	NotReady Readiness = "NotReady"
	// DegradedState: Degraded=True (whatever Available says).
	DegradedState Readiness = "Degraded"
)

// Assess returns op's readiness and, when not Ready, a message naming
// the operand and the condition that keeps it from being ready, e.g.
// "CDI/cdi-kubevirt-hyperconverged Available=False: deploying". It is
// HCO's per-operand rule (controllers/operands/generic_operand.go
// handleComponentConditions): an operand counts as ready when it is
// Available and not Degraded; Progressing alone does not make it unready.
// Unlike HCO it also needs the conditions to be of the operand's current
// generation: an operand whose status.observedGeneration is set and below
// its generation is NotReady ("... generation 2 not observed yet
// (observed 1)"), as kstatus judges objects, so that a Sync's health gate
// does not open on what the operator said of the previous spec.
func Assess(op Operand) (Readiness, string) {
	who := op.Kind
	if op.Name != "" {
		who += "/" + op.Name
	}
	if len(op.Conditions) == 0 {
		return NotReady, who + " has no conditions"
	}
	if c := meta.FindStatusCondition(op.Conditions, Degraded); c != nil && c.Status == metav1.ConditionTrue {
		return DegradedState, conditionMessage(who, c)
	}
	if op.ObservedGeneration > 0 && op.ObservedGeneration < op.Generation {
		return NotReady, fmt.Sprintf("%s generation %d not observed yet (observed %d)", who, op.Generation, op.ObservedGeneration)
	}
	c := meta.FindStatusCondition(op.Conditions, Available)
	if c == nil {
		return NotReady, who + " has no Available condition"
	}
	if c.Status != metav1.ConditionTrue {
		return NotReady, conditionMessage(who, c)
	}
	return Ready, ""
}

func conditionMessage(who string, c *metav1.Condition) string {
	s := fmt.Sprintf("%s %s=%s", who, c.Type, c.Status)
	if c.Message != "" {
		s += ": " + c.Message
	} else if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}
