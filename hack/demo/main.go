// Command converge-demo runs converge end to end on this machine's real
// single-node Kubernetes cluster, as a platform engineer uses it (`make
// demo`), with nothing simulated. It checks the machine (installing
// containerd and runc with apt when missing and root), builds the
// converge CLI, converge-controller and converge-node of version "demo"
// and their two images (internal/e2e/cluster, cached in bin/images/demo),
// starts the local cluster (internal/testing/cluster), serves the images
// from an OCI registry on the node address that containerd mirrors
// ghcr.io to (the kubelet pulls them), serves testdata/example from a Git repository on the node
// address, and narrates with the real CLI: `converge install --sync-url`,
// the health gates opening as the native operators' pods become ready,
// each operand CR's Available condition, a committed change applied with
// `converge reconcile sync`, a manual drift reverted (with its measured
// latency), the VM agent's pod deleted and the KubeVirt turning Degraded
// then Available again, events, suspend/resume around a commit, and a
// VirtualMachine committed to Git: its DataVolume imported over HTTP, the
// guest booted under libvirt with cloud-init and the pod network, its
// console read with `converge vm console`, then pruned by a commit. It
// stops the cluster and the Git server at the end, and on Ctrl-C (exit
// 130).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/internal/e2e/cluster"
	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// The Sync `converge install --sync-url` creates, and the objects the
// demo looks at.
const (
	syncName     = "converge"
	syncNS       = "converge-system"
	hcNamespace  = "kubevirt-hyperconverged"
	kubeVirt     = "kubevirt-kubevirt-hyperconverged"
	configPath   = "cluster" // the example's directory in the repository
	hcFile       = configPath + "/hyperconverged.yaml"
	demoVersion  = "demo"
	vmAgentLabel = "k8s-app=converge-vm-agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// controller-runtime's client logs through its global logger.
	ctrllog.SetLogger(logr.Discard())
	err := run(ctx)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "demo: interrupted; everything it started is stopped")
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// say starts a section.
func say(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

// note prints a line of narration.
func note(format string, args ...any) { fmt.Printf("# "+format+"\n", args...) }

// demo is what the sections share: the running cluster with converge's
// images, the config repository, and the timings for the summary.
type demo struct {
	env *cluster.Env
	// bin is bin/: the cluster's binaries, kubectl and the test guest.
	bin string
	// kubectlBin is bin/kubectl.
	kubectlBin string
	repo       *configRepo
	// url is the repository's URL, as converge-controller's pod fetches
	// it.
	url string
	// installed is when `converge install` started.
	installed time.Time
	timings   []timing
}

// timing is one measured step, listed at the end.
type timing struct {
	what string
	took time.Duration
}

// record keeps a timing for the summary.
func (d *demo) record(what string, took time.Duration) {
	d.timings = append(d.timings, timing{what, took})
}

// run runs every section in order and stops everything it started when it
// returns; ctx ending (Ctrl-C) cuts it short.
func run(ctx context.Context) (err error) {
	began := time.Now()
	bin, err := controlplane.BinDir()
	if err != nil {
		return fmt.Errorf("finding bin/: %w", err)
	}
	if err := preflight(ctx, bin); err != nil {
		return err
	}
	d := &demo{bin: bin, kubectlBin: filepath.Join(bin, "kubectl")}
	if _, err := os.Stat(d.kubectlBin); err != nil {
		return fmt.Errorf("%s: %w (make demo builds it: make %s)", d.kubectlBin, err, d.kubectlBin)
	}
	if d.env, err = startCluster(ctx, bin); err != nil {
		return err
	}
	d.record("Go builds (version "+demoVersion+")", d.env.GoBuild)
	d.record("image builds", d.env.ImageBuild)
	d.record("cluster start (from holding its lock)", d.env.Cluster.Timings.DefaultServiceAccount)
	if wait := d.env.Start - d.env.Cluster.Timings.DefaultServiceAccount; wait > time.Second {
		d.record("waiting for the machine's cluster lock", wait)
	}
	d.record("images pushed to the registry the kubelet pulls from", d.env.Import)
	removePool := poolCleanup()
	defer func() {
		if err != nil && ctx.Err() == nil {
			d.diagnose()
		}
		say("stopping the local cluster")
		stopped := time.Now()
		if serr := d.env.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stopping the cluster: %w", serr)
		}
		removePool()
		note("stopped in %s", since(stopped))
	}()

	work, err := os.MkdirTemp("", "converge-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	gctx, stopGit := context.WithCancel(ctx)
	defer stopGit()
	if err := d.serveConfig(gctx, filepath.Join(work, "git")); err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{d.install, d.gates, d.operands, d.change, d.drift, d.heal, d.events, d.suspend, d.vm} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	d.record("total, before stopping", time.Since(began))
	d.summary()
	return nil
}

// summary prints the timings recorded.
func (d *demo) summary() {
	say("timings")
	for _, t := range d.timings {
		fmt.Printf("  %-48s %s\n", t.what, roundFine(t.took))
	}
}

// roundFine rounds a measured duration: to 10ms under 10s, else to
// 100ms.
func roundFine(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// since gives the time since t, rounded for narration.
func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

// sleep waits d, or less when ctx ends; it gives ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
