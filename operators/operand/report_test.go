package operand

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCompute runs the status rules over the situations a CR goes
// through: first deployment, ready, a pod lost, a crash loop, a new
// generation, a refusal, an apply failure, deletion.
func TestCompute(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	notReady := Readiness{Message: "DaemonSet ns/agent: 0 of 1 pods ready, pod agent-x Pending: not scheduled to a node yet"}
	ready := Readiness{Ready: true}
	available := []metav1.Condition{
		{Type: ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonReady, LastTransitionTime: t0},
		{Type: ConditionProgressing, Status: metav1.ConditionFalse, Reason: ReasonReady, LastTransitionTime: t0},
		{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonReady, LastTransitionTime: t0},
	}
	deployed := Previous{Conditions: available, ObservedGeneration: 2, ObservedVersion: "v1"}
	lost := Previous{ObservedGeneration: 2, ObservedVersion: "v1", Conditions: []metav1.Condition{
		{Type: ConditionAvailable, Status: metav1.ConditionFalse, Reason: ReasonNotReady, LastTransitionTime: t0},
		{Type: ConditionProgressing, Status: metav1.ConditionTrue, Reason: ReasonNotReady, LastTransitionTime: t0},
		{Type: ConditionDegraded, Status: metav1.ConditionTrue, Reason: ReasonNotReady, LastTransitionTime: t0},
	}}
	type cond struct {
		status  metav1.ConditionStatus
		reason  string
		message string // contained
	}
	for _, tc := range []struct {
		name        string
		o           Observation
		available   cond
		progressing cond
		degraded    cond
		phase       string
		observed    string
		// keepTime: Available keeps t0 as its lastTransitionTime.
		keepTime bool
	}{
		{name: "first deployment, pods not ready",
			o:         Observation{Generation: 1, Version: "v1", Readiness: notReady},
			available: cond{"False", ReasonDeploying, "Deploying version v1: DaemonSet ns/agent: 0 of 1 pods ready"}, progressing: cond{"True", ReasonDeploying, "pod agent-x Pending"},
			degraded: cond{"False", ReasonDeploying, ""}, phase: PhaseDeploying},
		{name: "ready: the target version is observed",
			o:         Observation{Generation: 1, Version: "v1", Readiness: ready},
			available: cond{"True", ReasonReady, "All components are ready."}, progressing: cond{"False", ReasonReady, ""}, degraded: cond{"False", ReasonReady, ""},
			phase: PhaseDeployed, observed: "v1"},
		{name: "still ready: conditions keep their transition time",
			o:         Observation{Generation: 2, Version: "v1", Readiness: ready, Previous: deployed},
			available: cond{"True", ReasonReady, ""}, progressing: cond{"False", ReasonReady, ""}, degraded: cond{"False", ReasonReady, ""},
			phase: PhaseDeployed, observed: "v1", keepTime: true},
		{name: "a pod lost at the same generation is Degraded",
			o:         Observation{Generation: 2, Version: "v1", Readiness: notReady, Previous: deployed},
			available: cond{"False", ReasonNotReady, "DaemonSet ns/agent"}, progressing: cond{"True", ReasonNotReady, ""}, degraded: cond{"True", ReasonNotReady, "pod agent-x"},
			phase: PhaseDeployed, observed: "v1"},
		{name: "a lost pod stays Degraded on the next reconcile",
			o:         Observation{Generation: 2, Version: "v1", Readiness: notReady, Previous: lost},
			available: cond{"False", ReasonNotReady, "DaemonSet ns/agent"}, progressing: cond{"True", ReasonNotReady, ""}, degraded: cond{"True", ReasonNotReady, "pod agent-x"},
			phase: PhaseDeployed, observed: "v1", keepTime: true},
		{name: "a workload changed at the same generation (an input) is an update, not a loss",
			o:         Observation{Generation: 2, Version: "v1", Readiness: notReady, Changed: true, Previous: deployed},
			available: cond{"False", ReasonUpdating, "DaemonSet ns/agent"}, progressing: cond{"True", ReasonUpdating, ""}, degraded: cond{"False", ReasonUpdating, ""},
			phase: PhaseDeployed, observed: "v1"},
		{name: "a crash loop is Degraded, naming the pod",
			o:         Observation{Generation: 1, Version: "v1", Readiness: Readiness{Message: "x", Failing: "DaemonSet ns/agent: pod agent-x: container c CrashLoopBackOff"}},
			available: cond{"False", ReasonFailing, ""}, progressing: cond{"False", ReasonFailing, ""}, degraded: cond{"True", ReasonFailing, "DaemonSet ns/agent: pod agent-x: container c CrashLoopBackOff"},
			phase: PhaseDeploying},
		{name: "a new generation rolling out is an update",
			o:         Observation{Generation: 3, Version: "v1", Readiness: notReady, Previous: deployed},
			available: cond{"False", ReasonUpdating, ""}, progressing: cond{"True", ReasonUpdating, ""}, degraded: cond{"False", ReasonUpdating, ""},
			phase: PhaseDeployed, observed: "v1"},
		{name: "a new converge version: deploying it, the old one observed",
			o:         Observation{Generation: 2, Version: "v2", Readiness: notReady, Previous: Previous{ObservedGeneration: 2, ObservedVersion: "v1"}},
			available: cond{"False", ReasonUpdating, ""}, progressing: cond{"True", ReasonUpdating, ""}, degraded: cond{"False", ReasonUpdating, ""},
			phase: PhaseDeploying, observed: "v1"},
		{name: "a refused field: Degraded, the running roles still Available",
			o:         Observation{Generation: 3, Version: "v1", Readiness: ready, Previous: deployed, Failure: &Failure{Reason: ReasonUnsupported, Message: "spec.x: not run by converge"}},
			available: cond{"True", ReasonReady, ""}, progressing: cond{"False", ReasonUnsupported, ""}, degraded: cond{"True", ReasonUnsupported, "spec.x: not run by converge"},
			phase: PhaseDeployed, observed: "v1", keepTime: true},
		{name: "an apply failure before anything ran",
			o:         Observation{Generation: 1, Version: "v1", Readiness: Readiness{Message: "DaemonSet ns/agent: not found"}, Failure: &Failure{Reason: ReasonFailed, Message: "applying the roles: forbidden"}},
			available: cond{"False", ReasonFailed, "forbidden"}, progressing: cond{"False", ReasonFailed, ""}, degraded: cond{"True", ReasonFailed, "applying the roles: forbidden"},
			phase: PhaseDeploying},
		{name: "deleting",
			o:         Observation{Generation: 2, Version: "v1", Deleting: true, Previous: deployed},
			available: cond{"False", ReasonDeleting, ""}, progressing: cond{"True", ReasonDeleting, ""}, degraded: cond{"False", ReasonDeleting, ""},
			phase: PhaseDeleting, observed: "v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Compute(tc.o, t1)
			for typ, want := range map[string]cond{ConditionAvailable: tc.available, ConditionProgressing: tc.progressing, ConditionDegraded: tc.degraded} {
				c := meta.FindStatusCondition(r.Conditions, typ)
				if c == nil {
					t.Errorf("no %s condition", typ)
					continue
				}
				if string(c.Status) != string(want.status) || c.Reason != want.reason || !strings.Contains(c.Message, want.message) {
					t.Errorf("%s = %s %s %q, want %s %s containing %q", typ, c.Status, c.Reason, c.Message, want.status, want.reason, want.message)
				}
			}
			if r.Phase != tc.phase || r.ObservedVersion != tc.observed || r.ObservedGeneration != tc.o.Generation ||
				r.OperatorVersion != tc.o.Version || r.TargetVersion != tc.o.Version {
				t.Errorf("phase %s observed %q generation %d versions %s/%s, want %s %q %d %s", r.Phase, r.ObservedVersion, r.ObservedGeneration,
					r.OperatorVersion, r.TargetVersion, tc.phase, tc.observed, tc.o.Generation, tc.o.Version)
			}
			c := meta.FindStatusCondition(r.Conditions, ConditionAvailable)
			if want := map[bool]metav1.Time{true: t0, false: t1}[tc.keepTime]; c != nil && !c.LastTransitionTime.Equal(&want) {
				t.Errorf("Available lastTransitionTime %s, want %s", c.LastTransitionTime, want)
			}
		})
	}
}

// TestStatusFields lays one report out in KubeVirt's and the lifecycle
// SDK's field names and reads it back.
func TestStatusFields(t *testing.T) {
	r := Compute(Observation{Generation: 4, Version: "v1", Readiness: Readiness{Ready: true}}, metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	kv := StatusFields{Phase: "phase", OperatorVersion: "operatorVersion", TargetVersion: "targetKubeVirtVersion", ObservedVersion: "observedKubeVirtVersion",
		Extra: func(Report) map[string]any { return map[string]any{"targetKubeVirtRegistry": "ghcr.io/converge-dev"} }}
	s := kv.Status(r)
	for k, want := range map[string]any{"phase": "Deployed", "operatorVersion": "v1", "targetKubeVirtVersion": "v1", "observedKubeVirtVersion": "v1",
		"targetKubeVirtRegistry": "ghcr.io/converge-dev", "observedGeneration": int64(4)} {
		if s[k] != want {
			t.Errorf("status.%s = %v, want %v", k, s[k], want)
		}
	}
	if _, ok := s["targetVersion"]; ok {
		t.Error("KubeVirt status has targetVersion")
	}
	p := kv.Previous(jsonOf(s).(map[string]any))
	if p.ObservedGeneration != 4 || p.ObservedVersion != "v1" || !meta.IsStatusConditionTrue(p.Conditions, ConditionAvailable) {
		t.Errorf("Previous = %+v", p)
	}
	nac := StatusFields{OperatorVersion: "operatorVersion", TargetVersion: "targetVersion", ObservedVersion: "observedVersion"}
	if _, ok := nac.Status(r)["phase"]; ok {
		t.Error("a kind without phase got one")
	}
	if s := SDKStatusFields().Status(r); s["phase"] != "Deployed" || s["observedVersion"] != "v1" {
		t.Errorf("SDK status %v", s)
	}
}
