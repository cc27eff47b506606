package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/cli"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/reconciler"
)

// TestApplyUnderKills interrupts `converge apply` 20 times (rounds): the
// apply (reconciler.Pipeline with the CLI's options and a client of its
// own, as a fresh `converge apply` process has, on a graph rendered
// beforehand so that every moment drawn falls into the apply itself) runs
// and, after a random delay within one fault-free apply's duration,
// kube-apiserver or etcd (drawn at random) is killed with SIGKILL and
// restarted on the same data. Once the interrupted apply has returned,
// whatever it did, nothing any config holds may be gone; then the real
// CLI applies the next round's config (the user's recovery, with a config
// that no longer holds what the interrupted apply was creating) and must
// succeed at once, after which its inventory lists exactly the rendered
// objects, `converge diff` sees nothing to change, and no ConfigMap of
// the interrupted config is left behind.
func TestApplyUnderKills(t *testing.T) {
	t.Parallel() // the three tests of the package wait mostly on restarts: together they fit CI's budget
	w := startWorld(t)
	rng := newRand(t)
	ty := newTally(t)
	ctx := context.Background()
	dir := t.TempDir()
	cliApply := func(r int) {
		t.Helper()
		writeConfig(t, dir, r)
		var out bytes.Buffer
		if code := cli.Run([]string{"--kubeconfig", w.kubeconfig, "apply", "--revision", rev(r), dir}, &out, &out); code != 0 {
			t.Fatalf("converge apply of round %d: exit %d:\n%s", r, code, out.String())
		}
	}
	// The config of each parity, rendered once (rounds of a parity render
	// alike): the first apply creates the CRDs the facts need nothing of.
	cliApply(0)
	rendered, want := w.renderParities(t, dir)
	opts := reconciler.DefaultOptions()
	opts.HealthGates = false // as `converge apply`
	pipelineApply := func(ctx context.Context, r int) error {
		c, err := client.New(w.env.Config, client.Options{Scheme: w.scheme})
		if err != nil {
			return err
		}
		_, err = reconciler.NewPipeline(c, nil, opts).Sync(ctx, reconciler.Input{Rendered: rendered[r%2], Revision: rev(r)})
		return err
	}
	cliApply(1)
	start := time.Now()
	if err := pipelineApply(ctx, 2); err != nil {
		t.Fatal(err)
	}
	baseline := time.Since(start)
	cliApply(3)
	t.Logf("a fault-free apply (odd → even config: 3 created, 1 configured, 3 pruned) takes %s; faults fall within it", baseline.Round(time.Millisecond))

	for i := range rounds(t) {
		r := 4 + 2*i // interrupted: even config; recovery: odd
		proc := []controlplane.Process{controlplane.APIServer, controlplane.Etcd}[rng.IntN(2)]
		delay := between(rng, 0, baseline)
		actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		done := make(chan error, 1)
		go func() { done <- pipelineApply(actx, r) }()
		time.Sleep(delay)
		var early error
		ended := false
		select {
		case early = <-done:
			ended = true
		default:
		}
		killed := time.Now()
		if err := w.env.Kill(proc); err != nil {
			t.Fatal(err)
		}
		if err := w.env.Restart(proc, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		back := time.Since(killed)
		applyErr := early
		if !ended {
			select {
			case applyErr = <-done:
			case <-time.After(3 * time.Minute):
				t.Fatalf("round %d: the interrupted apply did not return within 3 minutes of the restart", i)
			}
		}
		cancel()
		outcome := "completed"
		switch {
		case ended && applyErr == nil:
			outcome = "ended before the kill"
		case ended:
			t.Fatalf("round %d: the apply failed before the kill: %v", i, applyErr)
		case applyErr != nil:
			outcome = "failed in " + failure(applyErr)
		}
		w.checkKept(t, fmt.Sprintf("round %d, after %s was killed at %s", i, proc, delay.Round(time.Millisecond)))

		cliApply(r + 1)
		recovered := time.Since(killed)
		ty.add(string(proc)+" killed during apply", outcome, recovered)
		t.Logf("round %2d: %s killed %s into the apply, back after %s; interrupted apply %s; converged %s after the kill",
			i, proc, delay.Round(time.Millisecond), back.Round(time.Millisecond), outcome, recovered.Round(time.Millisecond))
		st := w.applyInventory(t)
		if st.Revision != rev(r+1) {
			t.Errorf("round %d: inventory of revision %q, want %q", i, st.Revision, rev(r+1))
		}
		checkInventory(t, fmt.Sprintf("round %d: inventory", i), st.Inventory, want[1])
		w.checkNoDiff(t, rendered[1])
		w.checkOwned(t, configMapsOf(r+1))
		w.checkKept(t, fmt.Sprintf("round %d, converged", i))
		if t.Failed() {
			t.FailNow()
		}
	}
}

func rev(r int) string { return fmt.Sprintf("r%d", r) }

// failure shortens an apply error to where it failed (the pipeline's
// phase and stage, or the inventory, live state or status step) and the
// kind of cause.
func failure(err error) string {
	s := err.Error()
	where := "other"
	var se *reconciler.StageError
	switch {
	case errors.As(err, &se):
		where = strings.ToLower(string(se.Phase)) + " " + se.Stage
	case strings.Contains(s, "inventory"):
		where = "inventory"
	case strings.Contains(s, "status"):
		where = "status"
	case strings.Contains(s, "live"):
		where = "live state"
	}
	for _, k := range []string{"connection refused", "connection reset", "EOF", "context deadline exceeded", "timeout", "etcdserver", "no matches for kind", "the server is currently unable", "Internal error"} {
		if strings.Contains(s, k) {
			return strings.TrimSpace(where) + " (" + k + ")"
		}
	}
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strings.TrimSpace(where) + " (" + s + ")"
}
