// Command converge-demo runs converge end to end as a platform engineer
// uses it, with no cluster and no setup (`make demo`): it starts a real
// kube-apiserver and etcd from bin/ on loopback, puts the example config
// (testdata/example) into a Git repository served over HTTP by git
// http-backend on loopback, installs converge with `converge install
// --wait=false --sync-url …` (the Sync CRD, converge-controller's
// namespace, RBAC and Deployment, and a Sync of the repository), and runs
// converge-controller's Sync reconciler (package gitops/synccontroller) in this process,
// since without kubelets the installed Deployment never starts. It then
// narrates with the real CLI verbs, run in-process against a kubeconfig
// of the control plane, so the output is what a user sees: get, tree
// (components held back by health gates), the operators' part played by
// the demo (clearly labelled: no operator runs here), a committed
// feature-gate flip applied with `converge reconcile sync`, a manual
// drift reverted by the controller's watches (with its measured latency),
// events, and suspend/resume around a commit. Ctrl-C stops everything it
// started.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/cli"
	"github.com/converge-dev/converge/internal/testing/controlplane"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "demo: interrupted; everything it started is stopped")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// logs receives the controller's error logs on stderr until the demo is
// interrupted; the errors of reconciles cut short by the shutdown are
// dropped.
type logs struct{ ctx context.Context }

// Write passes p to stderr, or drops it once the demo is interrupted.
func (l logs) Write(p []byte) (int, error) {
	if l.ctx.Err() != nil {
		return len(p), nil
	}
	return os.Stderr.Write(p)
}

// The Sync converge install creates, and the objects the demo looks at.
const (
	syncName    = "converge"
	hcNamespace = "kubevirt-hyperconverged"
	kubeVirt    = "kubevirt-kubevirt-hyperconverged"
)

// say starts a section.
func say(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

// note prints a line of narration.
func note(format string, args ...any) { fmt.Printf("# "+format+"\n", args...) }

// demo is what the sections share.
type demo struct {
	kubeconfig string
	c          client.Client
	ctl        *controller
	repo       *configRepo
}

// run runs every section in order and stops everything it started when it
// returns; ctx ending (Ctrl-C) cuts it short.
func run(ctx context.Context) error {
	began := time.Now()
	ctrl.SetLogger(zap.New(zap.WriteTo(logs{ctx}), zap.Level(zapcore.ErrorLevel)))

	say("starting kube-apiserver and etcd from bin/ on loopback")
	env, err := controlplane.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	work, err := os.MkdirTemp("", "converge-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	d := &demo{kubeconfig: filepath.Join(work, "kubeconfig")}
	if err := env.Kubeconfig(d.kubeconfig); err != nil {
		return err
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	if d.c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	note("API server %s (up in %s); every `converge` below is the real CLI, run in this process with --kubeconfig %s",
		env.Config.Host, time.Since(began).Round(100*time.Millisecond), d.kubeconfig)

	say("creating the config repository from testdata/example, served by git http-backend on loopback")
	gitRoot := filepath.Join(work, "git")
	if err := os.Mkdir(gitRoot, 0o755); err != nil {
		return err
	}
	example, err := exampleDir()
	if err != nil {
		return err
	}
	if d.repo, err = newConfigRepo(gitRoot, "config", example); err != nil {
		return err
	}
	gctx, stopGit := context.WithCancel(ctx)
	defer stopGit()
	base, err := serveGit(gctx, gitRoot)
	if err != nil {
		return err
	}
	url := base + "/" + d.repo.Name
	head, _ := git(d.repo.Dir, "log", "--oneline", "-1")
	note("%s  branch main: %s", url, head)

	say("installing converge the way a user does, creating a Sync of the repository")
	if err := d.converge(ctx, "install", "--wait=false", "--sync-url", url, "--sync-branch", "main"); err != nil {
		return err
	}
	note("--wait=false: with no kubelet here the Deployment never starts, so the demo runs")
	note("converge-controller's reconciler (package gitops/synccontroller) in this process instead")

	say("starting converge-controller in this process (controller-runtime manager + synccontroller.Reconciler)")
	mctx, stopCtl := context.WithCancel(ctx)
	ctl, ctlDone, err := startController(mctx, env.Config, filepath.Join(work, "cache"))
	if err != nil {
		stopCtl()
		return err
	}
	defer func() {
		say("stopping converge-controller, the Git server, kube-apiserver and etcd")
		stopCtl()
		<-ctlDone
	}()
	d.ctl = ctl

	say("first reconcile: components whose dependencies are not healthy wait (health gates)")
	_, took, err := d.waitSync(ctx, "the first reconcile", func(s *v1alpha1.Sync) bool {
		return reason(s, v1alpha1.ReconcilingCondition) == v1alpha1.WaitingForHealthReason || ready(s)
	})
	if err != nil {
		return err
	}
	note("reported %s after the controller started", took.Round(10*time.Millisecond))
	if err := d.converge(ctx, "get"); err != nil {
		return err
	}
	if err := d.converge(ctx, "tree", syncName); err != nil {
		return err
	}

	if err := d.operators(ctx); err != nil {
		return err
	}
	if err := d.featureGate(ctx); err != nil {
		return err
	}
	if err := d.drift(ctx); err != nil {
		return err
	}

	say("what the controller did, as Kubernetes events on the Sync")
	if err := d.waitEvent(ctx, v1alpha1.DriftCorrectedReason); err != nil {
		return err
	}
	if err := d.converge(ctx, "events", syncName); err != nil {
		return err
	}

	if err := d.suspend(ctx); err != nil {
		return err
	}
	say("done in %s", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// operators plays the operators' part until every component is healthy
// and the Sync is Ready, then shows the result.
func (d *demo) operators(ctx context.Context) error {
	say("SIMULATING THE OPERATORS (none runs in this demo): marking each operand CR Available as it appears")
	_, n0 := d.ctl.resultsSince(0)
	octx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); simulateOperators(octx, d.c, d.ctl) }()
	s, took, err := d.waitSync(ctx, "Ready=True with every component healthy", func(s *v1alpha1.Sync) bool {
		return ready(s) && allHealthy(s)
	})
	stop()
	<-done
	if err != nil {
		return err
	}
	note("Sync Ready=True %s after the simulation began; revision %s", took.Round(10*time.Millisecond), s.Status.LastAppliedRevision)
	results, _ := d.ctl.resultsSince(n0)
	var created []string
	for _, r := range results {
		for _, e := range r.ChangeSet.Entries {
			if e.Action == ssa.CreatedAction {
				created = append(created, e.Subject)
			}
		}
	}
	if len(created) > 0 {
		note("held back by the health gates, created once their dependencies were Available: %s", strings.Join(created, ", "))
	}
	if err := d.converge(ctx, "get"); err != nil {
		return err
	}
	return d.converge(ctx, "tree", syncName)
}

// featureGate commits a feature-gate flip and has it applied now.
func (d *demo) featureGate(ctx context.Context) error {
	say("committing a change: spec.featureGates.downwardMetrics: false → true")
	sha, err := d.repo.edit("hyperconverged.yaml", "downwardMetrics: false", "downwardMetrics: true", "enable the downwardMetrics feature gate")
	if err != nil {
		return err
	}
	short, _ := git(d.repo.Dir, "log", "--oneline", "-1")
	note("committed %s", short)
	start := time.Now()
	if err := d.converge(ctx, "reconcile", "sync", syncName); err != nil {
		return err
	}
	note("the CLI returned %s after the request (spec.interval is 5m)", time.Since(start).Round(10*time.Millisecond))
	res := d.ctl.firstResult("main@sha1:" + sha)
	if res == nil {
		return fmt.Errorf("Sync %s: no sync of revision %s seen", syncName, sha)
	}
	changed := ssa.NewChangeSet()
	for _, e := range res.ChangeSet.Entries {
		if e.Action != ssa.UnchangedAction {
			changed.Add(e)
		}
	}
	note("the controller's change set for that revision (%d write requests):", res.Writes)
	cli.PrintChangeSet(os.Stdout, changed)
	note("%d other objects unchanged: not sent to the API server", len(res.ChangeSet.Entries)-len(changed.Entries))
	return nil
}

// drift changes a field converge owns on the KubeVirt CR, as someone
// with kubectl would, and measures how long the controller takes to put
// it back.
func (d *demo) drift(ctx context.Context) error {
	say("drift: someone changes a field converge owns on the KubeVirt CR")
	patch := `{"spec":{"uninstallStrategy":"RemoveWorkloads"}}`
	fmt.Printf("\n$ kubectl -n %s patch kubevirt %s --type=merge -p '%s'\n", hcNamespace, kubeVirt, patch)
	kv := kubeVirtObject()
	start := time.Now()
	if err := d.c.Patch(ctx, kv, client.RawPatch("application/merge-patch+json", []byte(patch)), client.FieldOwner("kubectl-patch")); err != nil {
		return fmt.Errorf("KubeVirt %s/%s: patching: %w", hcNamespace, kubeVirt, err)
	}
	fmt.Printf("kubevirt.kubevirt.io/%s patched\n", kubeVirt)
	note("(sent by the demo as kubectl does: a JSON merge patch, field manager kubectl-patch)")
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := d.kubeVirtField(ctx, "spec", "uninstallStrategy")
		if err != nil {
			return err
		}
		if v == "BlockUninstallIfWorkloadsExist" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("KubeVirt %s/%s: spec.uninstallStrategy still %q a minute after the change: drift not reverted", hcNamespace, kubeVirt, v)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	note("spec.uninstallStrategy is back to BlockUninstallIfWorkloadsExist %s after the change:", time.Since(start).Round(time.Millisecond))
	note("the controller's watch on the objects it applied saw it (spec.interval is 5m)")
	return nil
}

// suspend shows that a suspended Sync applies nothing, then resumes it.
func (d *demo) suspend(ctx context.Context) error {
	say("suspend: converge stops reconciling the Sync (and correcting drift) until it is resumed")
	if err := d.converge(ctx, "suspend", "sync", syncName); err != nil {
		return err
	}
	if _, _, err := d.waitSync(ctx, "Suspended", func(s *v1alpha1.Sync) bool {
		return s.Status.ObservedGeneration == s.Generation && reason(s, v1alpha1.ReadyCondition) == v1alpha1.SuspendedReason
	}); err != nil {
		return err
	}
	sha, err := d.repo.edit("hyperconverged.yaml", "parallelMigrationsPerCluster: 5", "parallelMigrationsPerCluster: 6", "six parallel migrations")
	if err != nil {
		return err
	}
	short, _ := git(d.repo.Dir, "log", "--oneline", "-1")
	note("committed %s (liveMigrationConfig.parallelMigrationsPerCluster: 5 → 6)", short)
	if err := d.converge(ctx, "reconcile", "sync", syncName); err == nil {
		return fmt.Errorf("converge reconcile of a suspended Sync succeeded")
	}
	if err := d.converge(ctx, "get"); err != nil {
		return err
	}
	v, err := d.kubeVirtField(ctx, "spec", "configuration", "migrations", "parallelMigrationsPerCluster")
	if err != nil {
		return err
	}
	applied := "no sync of it ran"
	if d.ctl.firstResult("main@sha1:"+sha) != nil {
		applied = "BUT A SYNC OF IT RAN"
	}
	note("KubeVirt parallelMigrationsPerCluster is still %s; %s: %s", v, sha[:7], applied)
	if err := d.converge(ctx, "resume", "sync", syncName); err != nil {
		return err
	}
	if v, err = d.kubeVirtField(ctx, "spec", "configuration", "migrations", "parallelMigrationsPerCluster"); err != nil {
		return err
	}
	note("KubeVirt parallelMigrationsPerCluster is now %s", v)
	return nil
}

// converge runs the converge CLI in this process as `converge args…
// --kubeconfig <the demo's>`, echoing the command line and writing its
// stdout and stderr to the demo's stdout. It returns an error when the
// command exits non-zero (its message was printed).
func (d *demo) converge(ctx context.Context, args ...string) error {
	fmt.Printf("\n$ converge %s\n", strings.Join(args, " "))
	if code := cli.RunContext(ctx, append(args, "--kubeconfig", d.kubeconfig), os.Stdout, os.Stdout); code != 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("converge %s: exit status %d", strings.Join(args, " "), code)
	}
	return nil
}

// waitSync reads the Sync every 50ms until cond holds, for at most 2
// minutes; it returns the Sync and how long it took. The error names
// what was awaited and the Sync's conditions.
func (d *demo) waitSync(ctx context.Context, what string, cond func(*v1alpha1.Sync) bool) (*v1alpha1.Sync, time.Duration, error) {
	start := time.Now()
	key := client.ObjectKey{Namespace: cli.DefaultNamespace, Name: syncName}
	s := &v1alpha1.Sync{}
	for {
		err := d.c.Get(ctx, key, s)
		if err == nil && cond(s) {
			return s, time.Since(start), nil
		}
		if time.Since(start) > 2*time.Minute {
			b, _ := json.Marshal(s.Status.Conditions)
			return nil, 0, fmt.Errorf("Sync %s: %s not reached within 2 minutes (get: %v); conditions: %s", key, what, err, b)
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
