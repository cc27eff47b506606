package resizer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPlan: the target is the request, or the volume's size when the
// request is below it (no shrink).
func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		req, pv, want string
		shrink        bool
	}{
		{"30Mi", "10Mi", "30Mi", false},
		{"10Mi", "10Mi", "10Mi", false},
		{"20Mi", "40Mi", "40Mi", true},
	} {
		got, shrink := plan(resource.MustParse(tc.req), resource.MustParse(tc.pv))
		if got.Cmp(resource.MustParse(tc.want)) != 0 || shrink != tc.shrink {
			t.Errorf("plan(%s, %s) = %s, %v; want %s, %v", tc.req, tc.pv, got.String(), shrink, tc.want, tc.shrink)
		}
	}
}

// TestStatusTransitions: each mark leaves exactly its resize condition
// and storage resource status, keeps other conditions, and markFinished
// sets the capacity and clears both.
func TestStatusTransitions(t *testing.T) {
	unused := corev1.PersistentVolumeClaimCondition{Type: "Unused", Status: corev1.ConditionTrue}
	for _, tc := range []struct {
		name     string
		mark     func(*corev1.PersistentVolumeClaimStatus)
		wantCond corev1.PersistentVolumeClaimConditionType
		wantStat corev1.ClaimResourceStatus
	}{
		{"in progress", func(st *corev1.PersistentVolumeClaimStatus) { markInProgress(st, resource.MustParse("30Mi")) },
			corev1.PersistentVolumeClaimResizing, corev1.PersistentVolumeClaimControllerResizeInProgress},
		{"infeasible", func(st *corev1.PersistentVolumeClaimStatus) { markControllerFailed(st, "no room", true) },
			corev1.PersistentVolumeClaimControllerResizeError, corev1.PersistentVolumeClaimControllerResizeInfeasible},
		{"failed", func(st *corev1.PersistentVolumeClaimStatus) { markControllerFailed(st, "busy", false) },
			corev1.PersistentVolumeClaimControllerResizeError, corev1.PersistentVolumeClaimControllerResizeInProgress},
		{"node pending", markNodePending,
			corev1.PersistentVolumeClaimFileSystemResizePending, corev1.PersistentVolumeClaimNodeResizePending},
		{"finished", func(st *corev1.PersistentVolumeClaimStatus) { markFinished(st, resource.MustParse("30Mi")) }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &corev1.PersistentVolumeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}, Conditions: []corev1.PersistentVolumeClaimCondition{unused}}
			markInProgress(st, resource.MustParse("30Mi"))
			tc.mark(st)
			var conds []corev1.PersistentVolumeClaimConditionType
			for _, c := range st.Conditions {
				if c.Type != unused.Type {
					conds = append(conds, c.Type)
				}
			}
			if len(st.Conditions) == 0 || st.Conditions[0].Type != unused.Type {
				t.Errorf("condition Unused lost: %+v", st.Conditions)
			}
			if tc.wantCond == "" && len(conds) != 0 || tc.wantCond != "" && (len(conds) != 1 || conds[0] != tc.wantCond) {
				t.Errorf("resize conditions %v, want %q", conds, tc.wantCond)
			}
			if got := st.AllocatedResourceStatuses[corev1.ResourceStorage]; got != tc.wantStat {
				t.Errorf("storage status %q, want %q", got, tc.wantStat)
			}
			if q := st.AllocatedResources[corev1.ResourceStorage]; q.Cmp(resource.MustParse("30Mi")) != 0 {
				t.Errorf("allocatedResources.storage %s, want 30Mi", q.String())
			}
			wantCap := "10Mi"
			if tc.name == "finished" {
				wantCap = "30Mi"
			}
			if q := st.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse(wantCap)) != 0 {
				t.Errorf("capacity %s, want %s", q.String(), wantCap)
			}
		})
	}
}

// TestRequeue: request changes (up or down), capacity growth, phase
// changes and resyncs requeue a claim; the resizer's own status writes
// do not.
func TestRequeue(t *testing.T) {
	claim := func(rv, req, capacity string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{}
		c.ResourceVersion = rv
		c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(req)}
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		c.Status.Phase = phase
		return c
	}
	b := corev1.ClaimBound
	for _, tc := range []struct {
		name   string
		o, n   *corev1.PersistentVolumeClaim
		wanted bool
	}{
		{"grow", claim("1", "10Mi", "10Mi", b), claim("2", "20Mi", "10Mi", b), true},
		{"lower (recovery)", claim("1", "1Pi", "10Mi", b), claim("2", "20Mi", "10Mi", b), true},
		{"capacity grew", claim("1", "20Mi", "10Mi", b), claim("2", "20Mi", "20Mi", b), true},
		{"bound", claim("1", "20Mi", "10Mi", corev1.ClaimPending), claim("2", "20Mi", "10Mi", b), true},
		{"resync", claim("1", "20Mi", "10Mi", b), claim("1", "20Mi", "10Mi", b), true},
		{"own status write", claim("1", "20Mi", "10Mi", b), claim("2", "20Mi", "10Mi", b), false},
	} {
		if got := requeue(tc.o, tc.n); got != tc.wanted {
			t.Errorf("%s: requeue %v, want %v", tc.name, got, tc.wanted)
		}
	}
}
