// Command converge-demo runs the main job end to end with no cluster and
// no setup (`make demo`): it starts a real kube-apiserver and etcd on
// loopback, puts the example config (testdata/example) into a local Git
// repository, runs converge-controller's pipeline against it, prints the
// applied inventory, the component health and the HyperConverged
// conditions. No operator runs, so the health gates hold back the
// components whose dependencies are not Available (hpp waits for cdi);
// the demo then plays the operators' part, clearly labelled, writing
// Available conditions on the operand CRs, and shows the held-back
// components applied by the syncs the status changes trigger. Finally it
// commits a feature-gate flip and shows the new revision applied. Ctrl-C
// stops everything it started.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/facts"
	"github.com/converge-dev/converge/gitops"
	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/internal/cli"
	"github.com/converge-dev/converge/internal/controlplane"
	"github.com/converge-dev/converge/reconciler"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

func run(ctx context.Context) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	say("starting kube-apiserver and etcd from bin/ on loopback")
	env, err := controlplane.Start()
	if err != nil {
		return err
	}
	defer func() {
		say("stopping kube-apiserver and etcd")
		_ = env.Stop()
	}()

	work, err := os.MkdirTemp("", "converge-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	repoDir := filepath.Join(work, "config")
	say("creating a Git repository with the example config: %s", repoDir)
	repo, err := initRepo(repoDir, "testdata/example")
	if err != nil {
		return err
	}

	results := make(chan *reconciler.Result, 16)
	rendered := make(chan *graph.Rendered, 16)
	mgr, sync, err := startController(env, repoDir, filepath.Join(work, "cache"), results, rendered)
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { cancel(); <-done }()

	say("first sync")
	res, err := waitFor(ctx, results, "")
	if err != nil {
		return err
	}
	fmt.Printf("revision %s, %d write requests\n\n", res.Revision, res.Writes)
	cli.PrintChangeSet(os.Stdout, res.ChangeSet)
	fmt.Println()
	printComponents(res)
	fmt.Println()
	cli.PrintConditions(os.Stdout, res.Conditions)

	if res.Waiting {
		if res, err = simulateOperators(ctx, env, rendered, results); err != nil {
			return err
		}
	}

	say("committing a change: spec.featureGates.downwardMetrics: false → true")
	if err := flipGate(repo, repoDir); err != nil {
		return err
	}
	sync.Trigger()
	res2, err := waitFor(ctx, results, res.Revision)
	if err != nil {
		return err
	}
	fmt.Printf("revision %s, %d write requests; changed objects:\n\n", res2.Revision, res2.Writes)
	changed := ssa.NewChangeSet()
	for _, e := range res2.ChangeSet.Entries {
		if e.Action != ssa.UnchangedAction {
			changed.Add(e)
		}
	}
	cli.PrintChangeSet(os.Stdout, changed)
	fmt.Printf("\n(%d other objects unchanged, not sent to the API server)\n", len(res2.ChangeSet.Entries)-len(changed.Entries))
	return nil
}

func startController(env *controlplane.Env, repoDir, cacheDir string, results chan<- *reconciler.Result, rendered chan<- *graph.Rendered) (ctrl.Manager, *reconciler.GitSync, error) {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, nil, err
	}
	engine, err := graph.NewEngine()
	if err != nil {
		return nil, nil, err
	}
	s := &reconciler.GitSync{
		Fetcher:  gitops.NewFetcher(gitops.Options{CacheDir: cacheDir}),
		Source:   gitops.Source{URL: repoDir},
		Path:     ".",
		Interval: time.Minute,
		Engine:   engine,
		Pipeline: reconciler.NewPipeline(mgr.GetClient(), mgr.GetCache(), reconciler.DefaultOptions()),
		Facts: func(ctx context.Context) (map[string]any, error) {
			return facts.Discover(ctx, mgr.GetAPIReader(), mgr.GetRESTMapper())
		},
		OnRender: func(r *graph.Rendered) {
			select {
			case rendered <- r:
			default:
			}
		},
		OnResult: func(r *reconciler.Result, err error) {
			if err != nil {
				fmt.Fprintln(os.Stderr, "sync error:", err)
				return
			}
			select {
			case results <- r:
			default:
			}
		},
	}
	return mgr, s, s.SetupWithManager(mgr)
}

// waitFor returns the first result with a revision other than not.
func waitFor(ctx context.Context, results <-chan *reconciler.Result, not string) (*reconciler.Result, error) {
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case r := <-results:
			if r.Revision != not {
				return r, nil
			}
		case <-timeout:
			return nil, fmt.Errorf("no sync of a new revision within 3 minutes")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func initRepo(dir, from string) (*git.Repository, error) {
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return nil, err
		}
	}
	return repo, commit(repo, "example HyperConverged config")
}

func flipGate(repo *git.Repository, dir string) error {
	p := filepath.Join(dir, "hyperconverged.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	s := strings.Replace(string(b), "downwardMetrics: false", "downwardMetrics: true", 1)
	if s == string(b) {
		return fmt.Errorf("%s: no downwardMetrics: false to flip", p)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		return err
	}
	return commit(repo, "enable the downwardMetrics feature gate")
}

func commit(repo *git.Repository, msg string) error {
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.AddGlob("."); err != nil {
		return err
	}
	_, err = wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "demo", Email: "demo@converge.dev", When: time.Now()}})
	return err
}
