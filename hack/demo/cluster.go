package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
)

// startCluster builds the converge CLI, converge-controller and
// converge-node of version demoVersion and their image archives into
// bin/images/demo (a warm run rebuilds nothing: Go's build cache, and
// archives whose inputs did not change are kept), starts the machine's
// single-node cluster from the binaries of bin and serves both images from
// an OCI registry on the node address that containerd mirrors ghcr.io to,
// printing each step as it goes and the timings after. It gives the
// running Env; stop it with Env.Stop.
func startCluster(ctx context.Context, bin string) (*cluster.Env, error) {
	say("building converge %s (CLI, converge-controller, converge-node) and its two images; starting the local cluster", demoVersion)
	o := cluster.DefaultOptions(bin)
	o.Version = demoVersion
	o.Out = filepath.Join(bin, "images", demoVersion)
	o.Progress = os.Stdout // DefaultOptions serves the images from a registry: the kubelet pulls them
	note("binaries and image archives in %s (apart from the tests' bin/images/e2e); Debian packages cached in %s",
		o.Out, filepath.Join(bin, "images", "apt"))
	note("the first run builds everything (minutes); later runs reuse it")
	if st, err := localcluster.CurrentStatus(); err == nil && st.Running() {
		note("the machine's one cluster is in use by %s: waiting up to %s for it", st.Owner, o.LockWait)
	}
	env, err := startInterruptible(ctx, o)
	if err != nil {
		if errors.Is(err, localcluster.ErrRunning) {
			return nil, fmt.Errorf("starting the local cluster: %w (a cluster left running by `make cluster` is stopped with `make cluster-stop`)", err)
		}
		return nil, fmt.Errorf("building converge or starting the local cluster: %w", err)
	}
	t := env.Cluster.Timings
	note("Go builds %s, images %s (%s); cluster up in %s once it held the machine's lock (node Ready after %s), images pushed to the registry in %s",
		round(env.GoBuild), round(env.ImageBuild), imageState(env), round(t.DefaultServiceAccount), round(t.NodeReady), round(env.Import))
	if wait := env.Start - t.DefaultServiceAccount; wait > time.Second {
		note("(waited %s for the lock while another process used the cluster)", round(wait))
	}
	note("node %s at %s; apiserver %s; converge's images served by an OCI registry at %s, which containerd mirrors %s to: the kubelet pulls them",
		env.Cluster.NodeName, localcluster.NodeIP, env.Cluster.APIServerAddress, env.Registry.Endpoint, env.Registry.Mirrored)
	return env, nil
}

// startInterruptible runs cluster.Start and gives its result, or ctx's
// error soon after ctx ends: Start honours ctx while it builds and starts
// the cluster, but not while it waits for another process's cluster
// lock, where it would hold Ctrl-C up to LockWait. Given up on there,
// Start has started nothing, and the cluster processes it might start
// after die with this process (the next start cleans up after them).
func startInterruptible(ctx context.Context, o cluster.Options) (*cluster.Env, error) {
	type result struct {
		env *cluster.Env
		err error
	}
	done := make(chan result, 1)
	go func() {
		env, err := cluster.Start(ctx, o)
		done <- result{env, err}
	}()
	select {
	case r := <-done:
		return r.env, r.err
	case <-ctx.Done():
	}
	select {
	case r := <-done:
		if r.env != nil {
			_ = r.env.Stop()
		}
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("interrupted while waiting for the machine's cluster lock: %w", ctx.Err())
	}
}

// imageState says whether the image archives were built or kept.
func imageState(env *cluster.Env) string {
	if env.Images.Controller.Skipped && env.Images.Node.Skipped {
		return "both unchanged"
	}
	return "rebuilt"
}

// round rounds a duration for narration.
func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// poolPath is the host directory of the example's hostpath storage pool
// (testdata/example/hostpathprovisioner.yaml).
const poolPath = "/var/hpvolumes"

// poolCleanup gives a function removing poolPath when it does not exist
// now (the demo's hostpath operator makes it), and doing nothing when it
// does.
func poolCleanup() func() {
	if _, err := os.Stat(poolPath); errors.Is(err, os.ErrNotExist) {
		return func() { _ = os.RemoveAll(poolPath) }
	}
	return func() {}
}
