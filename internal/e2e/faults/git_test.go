package faults_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// gitRounds is how many times each Git fault is injected.
const gitRounds = 3

// TestSyncGitServerDown takes the Sync's Git server down, either before
// a reconcile (the listener closed: connections refused) or in the middle
// of the pack transfer of a new commit (half of the pack sent, then the
// connection cut and the listener closed), gitRounds times each, taking
// turns. While it is down the Sync reports Ready=False FetchFailed for
// the reconcile asked for and applies and prunes nothing: it keeps
// lastAppliedRevision and its inventory, and the cluster keeps the
// previous commit's objects exactly. Once the server is back the Sync
// recovers by itself (its retry, no new request) and becomes Ready at the
// new commit with the checks of the kill tests; a fetch cut half-way
// leaves nothing in the Sync's cache that stops the next one.
func TestSyncGitServerDown(t *testing.T) {
	t.Parallel() // the three tests of the package wait mostly on restarts: together they fit CI's budget
	w := startWorld(t)
	ty := newTally(t)
	s := startSync(t, w)
	dir := t.TempDir()
	rendered, want := w.renderParities(t, dir)
	faults := []struct {
		name   string
		inject func()
	}{
		{"Git server down before a reconcile", s.git.Down},
		{"Git server down mid-fetch", s.git.DownMidFetch},
	}
	for i := range 2 * gitRounds {
		f := faults[i%2]
		r := i + 1
		before, err := s.get()
		must(t, err)
		rev := s.commit(t, r)
		f.inject()
		req := s.request(t)
		sy := s.wait(t, time.Minute, "Ready=False FetchFailed for the request", func(sy *v1alpha1.Sync) bool {
			c := apimeta.FindStatusCondition(sy.Status.Conditions, v1alpha1.ReadyCondition)
			return sy.Status.LastHandledReconcileAt == req && c != nil && c.Status == "False" && c.Reason == v1alpha1.FetchFailedReason
		})
		if !s.git.IsDown() {
			t.Fatalf("round %d: %s: the server is not down after the failed fetch (the fault was not injected)", i, f.name)
		}
		what := fmt.Sprintf("round %d, %s", i, f.name)
		if sy.Status.LastAppliedRevision != before.Status.LastAppliedRevision {
			t.Errorf("%s: lastAppliedRevision %q, was %q", what, sy.Status.LastAppliedRevision, before.Status.LastAppliedRevision)
		}
		if !reflect.DeepEqual(sy.Status.Inventory, before.Status.Inventory) {
			t.Errorf("%s: status.inventory changed while the fetch failed", what)
		}
		prev := (r - 1) % 2
		w.checkNoDiff(t, rendered[prev])
		w.checkOwned(t, configMapsOf(r-1))
		w.checkKept(t, what)

		up := time.Now()
		s.git.Up(t)
		s.wait(t, 2*time.Minute, what+": Ready at the new commit once the server is back", s.readyAt(rev))
		recovered := time.Since(up)
		ty.add(f.name, "FetchFailed, nothing applied", recovered)
		t.Logf("%s: FetchFailed (%s); Ready at the new commit %s after the server came back (retry interval %s)",
			what, trimMsg(apimeta.FindStatusCondition(sy.Status.Conditions, v1alpha1.ReadyCondition).Message), recovered.Round(time.Millisecond), retryInterval)
		sy, err = s.get()
		must(t, err)
		checkInventory(t, what+": status.inventory", sy.Status.Inventory, want[r%2])
		w.checkNoDiff(t, rendered[r%2])
		w.checkOwned(t, configMapsOf(r))
		w.checkKept(t, what+", converged")
		if t.Failed() {
			t.FailNow()
		}
	}
}

func trimMsg(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
