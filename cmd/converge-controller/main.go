// Command converge-controller runs the converge pipeline continuously: it
// fetches a HyperConverged config from a Git URL, renders the component
// graph and drives it into the cluster it runs in (the in-cluster
// Deployment), correcting drift as soon as its watches see it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/facts"
	"github.com/converge-dev/converge/gitops"
	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/reconciler"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		src         gitops.Source
		path        string
		interval    time.Duration
		metricsAddr string
		probeAddr   string
		leaderElect bool
		leaderNS    string
		cacheDir    string
		noPrune     bool
	)
	flag.StringVar(&src.URL, "repo-url", "", "Git URL of the config repository (local path, file://, http(s)://)")
	flag.StringVar(&src.Ref.Branch, "branch", "", "branch to follow (default: the remote's default branch)")
	flag.StringVar(&src.Ref.Tag, "tag", "", "tag to check out")
	flag.StringVar(&src.Ref.Commit, "commit", "", "commit to check out")
	flag.StringVar(&path, "path", ".", "directory of the config inside the repository")
	flag.DurationVar(&interval, "interval", time.Minute, "how often to fetch and reconcile")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: in-cluster namespace)")
	flag.StringVar(&cacheDir, "cache-dir", "", "Git cache directory (default: the user cache dir)")
	flag.BoolVar(&noPrune, "no-prune", false, "never delete objects that left the config")
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	if src.URL == "" {
		return fmt.Errorf("--repo-url is required")
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))

	req, err := labels.NewRequirement(reconciler.OwnerGroup+"/inventory", selection.Exists, nil)
	if err != nil {
		return err
	}
	inventorySel := labels.NewSelector().Add(*req)
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "converge-controller.converge.dev",
		LeaderElectionNamespace: leaderNS,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: inventorySel},
		}},
	})
	if err != nil {
		return err
	}
	engine, err := graph.NewEngine()
	if err != nil {
		return err
	}
	gopts := gitops.DefaultOptions()
	if cacheDir != "" {
		gopts.CacheDir = cacheDir
	}
	opts := reconciler.DefaultOptions()
	opts.Prune = !noPrune
	s := &reconciler.GitSync{
		Fetcher: gitops.NewFetcher(gopts), Source: src, Path: path, Interval: interval, Engine: engine,
		Pipeline: reconciler.NewPipeline(mgr.GetClient(), mgr.GetCache(), opts),
		Facts: func(ctx context.Context) (map[string]any, error) {
			return facts.Discover(ctx, mgr.GetCache(), mgr.GetRESTMapper())
		},
	}
	if err := s.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
