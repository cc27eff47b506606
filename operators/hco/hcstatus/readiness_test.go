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
		want    Readiness
		wantMsg string
	}{
		{"no conditions", nil, NotReady, "CDI/cdi has no conditions"},
		{"available", []metav1.Condition{cond(Available, "True", ""), cond(Degraded, "False", "")}, Ready, ""},
		{"available and progressing", []metav1.Condition{cond(Available, "True", ""), cond(Progressing, "True", "upgrading")}, Ready, ""},
		{"not available", []metav1.Condition{cond(Available, "False", "deploying")}, NotReady, "CDI/cdi Available=False: deploying"},
		{"available missing", []metav1.Condition{cond(Progressing, "True", "")}, NotReady, "CDI/cdi has no Available condition"},
		{"degraded wins", []metav1.Condition{cond(Available, "True", ""), cond(Degraded, "True", "crashloop")}, DegradedState, "CDI/cdi Degraded=True: crashloop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := Assess(Operand{Kind: "CDI", Name: "cdi", Conditions: tc.conds})
			if got != tc.want || msg != tc.wantMsg {
				t.Errorf("Assess = %s %q, want %s %q", got, msg, tc.want, tc.wantMsg)
			}
		})
	}
}
