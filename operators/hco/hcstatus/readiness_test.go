package hcstatus

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAssess(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: "R", Message: msg}
	}
	for _, tc := range []struct {
		name    string
		conds   []metav1.Condition
		gen     [2]int64 // generation, observedGeneration
		want    Readiness
		wantMsg string
	}{
		{"no conditions", nil, [2]int64{}, NotReady, "CDI/cdi has no conditions"},
		{"available", []metav1.Condition{cond(Available, "True", ""), cond(Degraded, "False", "")}, [2]int64{}, Ready, ""},
		{"available and progressing", []metav1.Condition{cond(Available, "True", ""), cond(Progressing, "True", "upgrading")}, [2]int64{}, Ready, ""},
		{"not available", []metav1.Condition{cond(Available, "False", "deploying")}, [2]int64{}, NotReady, "CDI/cdi Available=False: deploying"},
		{"available missing", []metav1.Condition{cond(Progressing, "True", "")}, [2]int64{}, NotReady, "CDI/cdi has no Available condition"},
		{"degraded wins", []metav1.Condition{cond(Available, "True", ""), cond(Degraded, "True", "crashloop")}, [2]int64{}, DegradedState, "CDI/cdi Degraded=True: crashloop"},
		{"available at its generation", []metav1.Condition{cond(Available, "True", "")}, [2]int64{3, 3}, Ready, ""},
		{"available for an older generation", []metav1.Condition{cond(Available, "True", "")}, [2]int64{2, 1}, NotReady, "CDI/cdi generation 2 not observed yet (observed 1)"},
		{"no observedGeneration written", []metav1.Condition{cond(Available, "True", "")}, [2]int64{2, 0}, Ready, ""},
		{"degraded for an older generation", []metav1.Condition{cond(Available, "True", ""), cond(Degraded, "True", "crashloop")}, [2]int64{2, 1}, DegradedState, "CDI/cdi Degraded=True: crashloop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := Assess(Operand{Kind: "CDI", Name: "cdi", Conditions: tc.conds, Generation: tc.gen[0], ObservedGeneration: tc.gen[1]})
			if got != tc.want || msg != tc.wantMsg {
				t.Errorf("Assess = %s %q, want %s %q", got, msg, tc.want, tc.wantMsg)
			}
		})
	}
}
