package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/images"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
)

// Env is the running cluster with converge's images imported.
type Env struct {
	// Cluster is the machine's cluster (its admin Config and
	// Kubeconfig, its logs).
	Cluster *localcluster.Cluster
	// Artifacts are the binaries and images of Options.Version.
	Artifacts
	// Client knows the client-go types, apiextensions.k8s.io/v1 and
	// converge.dev/v1alpha1 (other kinds as unstructured objects).
	Client client.Client
	// Clientset is a client-go clientset of the cluster (pod logs).
	Clientset kubernetes.Interface
	// Start is how long the cluster took to start (from holding its
	// lock) and Import how long pushing both images to Registry (or,
	// without Options.Registry, importing them into containerd) took.
	Start, Import time.Duration
	// Registry serves the images when Options.Registry is set; nil
	// otherwise.
	Registry *ImageRegistry
}

// Check reports, wrapped in ErrCannotRun, what Start needs and does not
// find: what the cluster needs (localcluster.Check: root, containerd,
// runc, the binaries of bin) and what Build needs.
func Check(bin string) error {
	var msgs []string
	if err := localcluster.Check(bin); err != nil {
		msgs = append(msgs, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if err := checkBuild(bin); err != nil {
		msgs = append(msgs, strings.TrimPrefix(err.Error(), ErrCannotRun.Error()+": "))
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%w: %s", ErrCannotRun, strings.Join(msgs, "; "))
	}
	return nil
}

// Start builds the binaries and images (Build), starts the machine's
// cluster (waiting up to o.LockWait for another process's) and imports
// both images into it. On failure it stops what it started. Stop the Env
// with Stop.
func Start(ctx context.Context, o Options) (*Env, error) {
	if err := Check(o.Bin); err != nil {
		return nil, err
	}
	a, err := Build(ctx, o)
	if err != nil {
		return nil, err
	}
	co := localcluster.DefaultOptions()
	co.BinDir, co.LockWait, co.Progress = o.Bin, o.LockWait, o.Progress
	start := time.Now()
	c, err := localcluster.Start(ctx, co)
	if err != nil {
		return nil, err
	}
	e := &Env{Cluster: c, Artifacts: a, Start: time.Since(start)}
	if err := e.init(ctx, o.Registry); err != nil {
		if serr := c.Stop(); serr != nil {
			err = fmt.Errorf("%w\n(and stopping the cluster: %v)", err, serr)
		}
		return nil, err
	}
	how := "imported into containerd"
	if e.Registry != nil {
		how = "pushed to the registry " + e.Registry.Endpoint + " mirroring " + e.Registry.Mirrored
	}
	fmt.Fprintf(writerOrDiscard(o.Progress), "e2e: cluster up in %s, images %s in %s\n", e.Start.Round(time.Millisecond), how, e.Import.Round(time.Millisecond))
	return e, nil
}

// init imports the images, or serves them from a registry, and makes the
// clients.
func (e *Env) init(ctx context.Context, registry bool) error {
	start := time.Now()
	archives := []images.Archive{e.Images.Controller, e.Images.Node}
	if registry {
		reg, err := serveImages(archives)
		if err != nil {
			return err
		}
		e.Registry = reg
	} else {
		for _, a := range archives {
			if err := e.Cluster.ImportImage(ctx, a.Path); err != nil {
				return fmt.Errorf("importing %s: %w", a.Path, err)
			}
		}
	}
	e.Import = time.Since(start)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	var err error
	if e.Client, err = client.New(e.Cluster.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	e.Clientset, err = kubernetes.NewForConfig(e.Cluster.Config)
	return err
}

// Stop stops the cluster (localcluster.Cluster.Stop).
func (e *Env) Stop() error {
	if e.Registry != nil {
		e.Registry.Close()
	}
	return e.Cluster.Stop()
}

// Result is one run of the CLI.
type Result struct {
	// Args are the arguments after --kubeconfig.
	Args []string
	// Stdout and Stderr are its output; Err is its exit error (nil for
	// exit status 0).
	Stdout, Stderr string
	Err            error
	// Took is its wall time.
	Took time.Duration
}

// String gives the command line and its output, for test failures.
func (r Result) String() string {
	return fmt.Sprintf("converge %s: %v (%s)\nstdout:\n%s\nstderr:\n%s", strings.Join(r.Args, " "), r.Err, r.Took.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// Converge runs the built CLI with --kubeconfig of the cluster's admin
// kubeconfig and args, as a user does, and gives its output.
func (e *Env) Converge(ctx context.Context, args ...string) Result {
	cmd := exec.CommandContext(ctx, e.CLI, append([]string{"--kubeconfig", e.Cluster.Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	return Result{Args: args, Stdout: stdout.String(), Stderr: stderr.String(), Err: err, Took: time.Since(start)}
}
