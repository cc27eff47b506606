package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// TestSyncUnderKills interrupts a Sync's reconcile 20 times (rounds): a
// commit of the next config, a reconcile request, and after a random
// delay within one fault-free reconcile's duration (request to Ready at
// the new revision: fetch, render, apply, status), kube-apiserver or etcd
// is killed with SIGKILL and restarted on the same data while the
// controller keeps running (its watches and requests fail and retry).
// While it is down a further commit (a config without what the
// interrupted one was creating) is pushed, so the controller's retry
// fetches that one, and it is requested after the restart; the Sync must
// become Ready at it, its status.inventory then lists exactly the
// rendered objects, `converge diff` of that commit sees nothing to
// change, no ConfigMap of the interrupted config is left behind, and
// nothing every config holds was deleted.
func TestSyncUnderKills(t *testing.T) {
	t.Parallel() // the three tests of the package wait mostly on restarts: together they fit CI's budget
	w := startWorld(t)
	rng := newRand(t)
	ty := newTally(t)
	s := startSync(t, w)
	dir := t.TempDir()
	rendered, want := w.renderParities(t, dir)

	// a fault-free round gives the window the faults are drawn from
	s.commit(t, 1)
	rev := s.head(t)
	start := time.Now()
	s.request(t)
	s.wait(t, 2*time.Minute, "Ready at round 1", s.readyAt(rev))
	baseline := time.Since(start)
	t.Logf("a fault-free reconcile (request → Ready at a new commit: 3 created, 1 configured, 3 pruned) takes %s; faults fall within it", baseline.Round(time.Millisecond))

	for i := range rounds(t) {
		r := 2 + 2*i // interrupted: even config; next: odd
		proc := []controlplane.Process{controlplane.APIServer, controlplane.Etcd}[rng.IntN(2)]
		delay := between(rng, 0, baseline)
		interrupted := s.commit(t, r)
		s.request(t)
		time.Sleep(delay)
		sy, err := s.get()
		before := len(s.outcomes(interrupted))
		readyBefore := err == nil && s.readyAt(interrupted)(sy)
		killed := time.Now()
		must(t, w.env.Kill(proc))
		next := s.commit(t, r+1) // while the server is down: the retry fetches it
		must(t, w.env.Restart(proc, 2*time.Minute))
		back := time.Since(killed)
		w.checkKept(t, fmt.Sprintf("round %d, after %s was killed %s into the reconcile", i, proc, delay.Round(time.Millisecond)))
		s.request(t)
		s.wait(t, 2*time.Minute, fmt.Sprintf("round %d: Ready at the commit after the fault", i), s.readyAt(next))
		recovered := time.Since(killed)
		outcome := syncOutcome(readyBefore, s.outcomes(interrupted), before)
		ty.add(string(proc)+" killed during a Sync", outcome, recovered)
		t.Logf("round %2d: %s killed %s into the reconcile, back after %s; interrupted reconcile: %s; Ready at the next commit %s after the kill",
			i, proc, delay.Round(time.Millisecond), back.Round(time.Millisecond), outcome, recovered.Round(time.Millisecond))

		sy, err = s.get()
		must(t, err)
		checkInventory(t, fmt.Sprintf("round %d: status.inventory", i), sy.Status.Inventory, want[1])
		w.checkNoDiff(t, rendered[1])
		w.checkOwned(t, configMapsOf(r+1))
		w.checkKept(t, fmt.Sprintf("round %d, converged", i))
		if t.Failed() {
			t.FailNow()
		}
	}
}

// syncOutcome says what the interrupted reconcile of a revision did: Ready
// before the kill, or its Pipeline.Sync results (n of them before the
// kill): none (killed while fetching, rendering or reporting progress),
// failed (where), or applied after the restart (the controller's retry).
func syncOutcome(readyBefore bool, results []error, n int) string {
	switch {
	case readyBefore:
		return "ended before the kill"
	case len(results) > n && results[n] != nil:
		return "failed in " + failure(results[n])
	case len(results) > n:
		return "applied after the restart"
	case n > 0 && results[n-1] == nil:
		return "applied, status not yet written"
	case n > 0:
		return "failed in " + failure(results[n-1])
	}
	return "killed before its apply"
}
