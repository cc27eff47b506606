package hcstatus

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cond(t string, s metav1.ConditionStatus, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Message: msg}
}

var healthy = []metav1.Condition{
	cond(Available, metav1.ConditionTrue, ""), cond(Progressing, metav1.ConditionFalse, ""),
	cond(Degraded, metav1.ConditionFalse, ""), cond(Upgradeable, metav1.ConditionTrue, ""),
}

// want is the status and reason expected per condition type; a missing
// type must be absent.
type want map[string][2]string

func TestAggregate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     Input
		want   want
		health string
	}{{
		name: "operands with no conditions: not available, as HCO on a bare cluster",
		in:   Input{Operands: []Operand{{Kind: "KubeVirt"}, {Kind: "CDI"}}},
		want: want{
			ReconcileComplete: {"True", "ReconcileCompleted"},
			Available:         {"False", "CDIConditions"}, // the last operand wins
			Progressing:       {"True", "CDIConditions"},
			Degraded:          {"False", "ReconcileCompleted"},
			Upgradeable:       {"False", "CDIConditions"},
		},
		health: "error",
	}, {
		name: "all healthy",
		in:   Input{Operands: []Operand{{Kind: "KubeVirt", Conditions: healthy}, {Kind: "CDI", Conditions: healthy}}},
		want: want{
			ReconcileComplete: {"True", "ReconcileCompleted"}, Available: {"True", "ReconcileCompleted"},
			Progressing: {"False", "ReconcileCompleted"}, Degraded: {"False", "ReconcileCompleted"},
			Upgradeable: {"True", "ReconcileCompleted"},
		},
		health: "healthy",
	}, {
		name: "a progressing operand blocks upgrades but stays available",
		in: Input{Operands: []Operand{{Kind: "CDI", Conditions: []metav1.Condition{
			cond(Available, metav1.ConditionTrue, ""), cond(Progressing, metav1.ConditionTrue, "rolling"),
		}}}},
		want: want{
			Available: {"True", "ReconcileCompleted"}, Progressing: {"True", "CDIProgressing"},
			Upgradeable: {"False", "CDIProgressing"}, Degraded: {"False", "ReconcileCompleted"},
		},
		health: "warning",
	}, {
		name: "a degraded operand makes the HC unavailable",
		in: Input{Operands: []Operand{{Kind: "NetworkAddonsConfig", Conditions: []metav1.Condition{
			cond(Available, metav1.ConditionTrue, ""), cond(Degraded, metav1.ConditionTrue, "crash"),
		}}}},
		want: want{
			Degraded: {"True", "NetworkAddonsConfigDegraded"}, Available: {"False", "HCODegraded"},
			Upgradeable: {"False", "HCODegraded"}, Progressing: {"False", "ReconcileCompleted"},
		},
		health: "error",
	}, {
		name:   "a missing Available condition counts as not available",
		in:     Input{Operands: []Operand{{Kind: "KubeVirt", Conditions: []metav1.Condition{cond(Degraded, metav1.ConditionFalse, "")}}}},
		want:   want{Available: {"False", "KubeVirtNotAvailable"}},
		health: "error",
	}, {
		name: "a failed reconcile and a jsonpatch in effect",
		in:   Input{Operands: []Operand{{Kind: "KubeVirt", Conditions: healthy}}, ReconcileError: errors.New("boom"), Tainted: []string{"kubevirt.kubevirt.io/jsonpatch"}},
		want: want{
			ReconcileComplete:    {"False", "ReconcileFailed"},
			TaintedConfiguration: {"True", "UnsupportedFeatureAnnotation"},
		},
		health: "warning",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Aggregate(tc.in)
			for typ, w := range tc.want {
				c := meta.FindStatusCondition(got, typ)
				if c == nil {
					t.Errorf("%s: missing", typ)
					continue
				}
				if string(c.Status) != w[0] || c.Reason != w[1] {
					t.Errorf("%s = %s/%s, want %s/%s", typ, c.Status, c.Reason, w[0], w[1])
				}
			}
			if _, ok := tc.want[TaintedConfiguration]; !ok && meta.FindStatusCondition(got, TaintedConfiguration) != nil {
				t.Errorf("TaintedConfiguration present without a jsonpatch in effect")
			}
			if h := SystemHealth(got); h != tc.health {
				t.Errorf("SystemHealth = %s, want %s", h, tc.health)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	t0 := metav1.Unix(1000, 0)
	t1 := metav1.Unix(2000, 0)
	cur := []metav1.Condition{
		{Type: Available, Status: metav1.ConditionTrue, Reason: "ReconcileCompleted", LastTransitionTime: t0},
		{Type: TaintedConfiguration, Status: metav1.ConditionTrue, Reason: "UnsupportedFeatureAnnotation", LastTransitionTime: t0},
	}
	if !Merge(&cur, []metav1.Condition{{Type: Available, Status: metav1.ConditionTrue, Reason: "ReconcileCompleted"}}, t1) {
		t.Fatal("Merge reported no change although TaintedConfiguration goes away")
	}
	if meta.FindStatusCondition(cur, TaintedConfiguration) != nil {
		t.Error("TaintedConfiguration kept; HCO removes it when the patches are gone")
	}
	if c := meta.FindStatusCondition(cur, Available); !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("Available lastTransitionTime moved to %v although its status did not change", c.LastTransitionTime)
	}
	if Merge(&cur, []metav1.Condition{{Type: Available, Status: metav1.ConditionTrue, Reason: "ReconcileCompleted"}}, t1) {
		t.Error("Merge of the same conditions reported a change")
	}
	Merge(&cur, []metav1.Condition{{Type: Available, Status: metav1.ConditionFalse, Reason: "X"}}, t1)
	if c := meta.FindStatusCondition(cur, Available); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("Available lastTransitionTime = %v after a status change, want %v", c.LastTransitionTime, t1)
	}
}
