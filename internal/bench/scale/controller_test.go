package scale

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/bench/measure"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// controllerExe is converge-controller built once per test binary, in
// dir (removed by TestMain): the benchmarks share it.
var controllerExe struct {
	once      sync.Once
	dir, path string
	err       error
}

// buildController builds cmd/converge-controller once per test binary.
func buildController(b *testing.B) string {
	controllerExe.once.Do(func() {
		if controllerExe.dir, controllerExe.err = os.MkdirTemp("", "converge-scale-"); controllerExe.err != nil {
			return
		}
		path := filepath.Join(controllerExe.dir, "converge-controller")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/converge-controller")
		cmd.Dir = vmtest.RepoRoot(b)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			controllerExe.err = fmt.Errorf("go build ./cmd/converge-controller: %v\n%s", err, out)
			return
		}
		b.Logf("go build ./cmd/converge-controller: %s", time.Since(start).Round(time.Millisecond))
		controllerExe.path = path
	})
	if controllerExe.err != nil {
		b.Fatal(controllerExe.err)
	}
	return controllerExe.path
}

// controller is a converge-controller process against one API server.
type controller struct {
	cmd *exec.Cmd
	log string
	// exited is closed when the process ends; err is then its Wait error.
	exited chan struct{}
	err    error
}

// startController installs the Sync CRD (as `converge install` does:
// the controller's Sync watch ends the process when it is not served
// within controller-runtime's cache sync timeout) and runs
// converge-controller as a process against env with its defaults,
// except --webhook=false (no Service fronts a webhook server here, so the
// hco-webhook, VM validation and MAC pool are not served), no virt-api,
// receiver or metrics server, and its probes on a loopback port
// (CONVERGE_SCALE_PPROF=host:port serves its pprof endpoints there); it
// returns once /readyz answers 200.
func startController(b *testing.B, env *controlplane.Env, extra ...string) *controller {
	exe := buildController(b)
	installSyncCRD(b, env)
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.Kubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}
	probe := controlplane.FreePort(b)
	args := append([]string{"--kubeconfig", kubeconfig, "--webhook=false", "--cache-dir", filepath.Join(dir, "cache"),
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probe),
		"--receiver-bind-address", "0", "--virt-api=false"}, extra...)
	if addr := os.Getenv("CONVERGE_SCALE_PPROF"); addr != "" {
		// to profile the controller during a size: go tool pprof
		// http://<addr>/debug/pprof/profile?seconds=30
		args = append(args, "--pprof-bind-address", addr)
	}
	c := &controller{cmd: exec.Command(exe, args...), log: filepath.Join(dir, "controller.log"), exited: make(chan struct{})}
	logs, err := os.Create(c.log)
	if err != nil {
		b.Fatal(err)
	}
	c.cmd.Stdout, c.cmd.Stderr = logs, logs
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.exited) }()
	b.Cleanup(func() { _ = c.cmd.Process.Kill(); <-c.exited; _ = logs.Close() })
	controlplane.Eventually(b, time.Minute, func() bool {
		c.check(b)
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probe))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return c
}

// check fails the benchmark with the log's tail if the process ended.
func (c *controller) check(b *testing.B) {
	select {
	case <-c.exited:
		b.Fatalf("converge-controller ended: %v\n%s", c.err, c.tail(40))
	default:
	}
}

// installSyncCRD applies the converge.dev Sync CRD to env and waits until
// it is served.
func installSyncCRD(b *testing.B, env *controlplane.Env) {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	engine, err := graph.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	crd, err := engine.SyncCRD()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("bench"), client.ForceOwnership); err != nil {
		b.Fatal(err)
	}
	controlplane.Eventually(b, 30*time.Second, func() bool { return c.List(ctx, &v1alpha1.SyncList{}) == nil })
}

// cpu gives the controller's CPU seconds so far.
func (c *controller) cpu(b *testing.B) float64 {
	s, err := measure.CPUSeconds(c.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// peakRSS gives the controller's peak resident memory in MiB.
func (c *controller) peakRSS(b *testing.B) float64 {
	m, err := measure.PeakRSSMiB(c.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// tail gives the last n lines of the controller's log.
func (c *controller) tail(n int) string {
	data, _ := os.ReadFile(c.log)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
