package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// requireEnv is the variable that turns a skip for lack of what the
// cluster or the images need into a failure (CI sets it).
const requireEnv = "CONVERGE_REQUIRE_NODEPLANE"

// shared is the package's one Env, started by the first Shared.
var shared struct {
	once sync.Once
	env  *Env
	err  error
	// logs collects the progress lines of the start, shown by the tests
	// that fail for it.
	logs strings.Builder
}

// Shared gives the Env the tests of a test binary share, starting it at
// the first call (DefaultOptions; its progress in the log of the test
// that started it, or of each test that fails for it). It
// skips t when the machine cannot run it (ErrCannotRun), or fails it when
// CONVERGE_REQUIRE_NODEPLANE=1, and fails t when the start failed. Main
// stops it once the tests are done.
func Shared(t testing.TB) *Env {
	t.Helper()
	shared.once.Do(func() {
		bin, err := controlplane.BinDir()
		if err != nil {
			shared.err = fmt.Errorf("%w: %w", ErrCannotRun, err)
			return
		}
		o := DefaultOptions(bin)
		o.Progress = &lockedWriter{w: &shared.logs}
		shared.env, shared.err = Start(context.Background(), o)
		if shared.err == nil {
			t.Log(strings.TrimRight(shared.logs.String(), "\n"))
		}
	})
	if shared.err != nil {
		skipOrFail(t, shared.err, shared.logs.String())
	}
	return shared.env
}

// Main runs the tests of m, then cleanups (the fixtures the tests shared,
// such as a Git server, in the order given), and stops the shared Env if
// one started; a package's TestMain is
//
//	func TestMain(m *testing.M) { cluster.Main(m) }
//
// It exits with the tests' status, or 1 when stopping fails.
func Main(m *testing.M, cleanups ...func()) {
	// controller-runtime's client logs through its global logger.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	if shared.env != nil {
		if code != 0 {
			for _, comp := range []string{"kubelet", "containerd"} {
				fmt.Fprintf(os.Stderr, "%s log tail (%s):\n%s\n", comp, shared.env.Cluster.LogPath(comp), shared.env.Cluster.LogTail(comp, 4000))
			}
		}
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the e2e cluster:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// StartForBench starts an Env of its own for b (DefaultOptions, progress
// in b's log), stopped in b.Cleanup, with Shared's skip and failure rules.
func StartForBench(b *testing.B) *Env {
	b.Helper()
	bin, err := controlplane.BinDir()
	if err != nil {
		skipOrFail(b, fmt.Errorf("%w: %w", ErrCannotRun, err), "")
	}
	o := DefaultOptions(bin)
	o.Progress = logWriter{b}
	e, err := Start(context.Background(), o)
	if err != nil {
		skipOrFail(b, err, "")
	}
	b.Cleanup(func() {
		if err := e.Stop(); err != nil {
			b.Errorf("stopping the cluster: %v", err)
		}
	})
	return e
}

// skipOrFail skips t for ErrCannotRun (fails it under
// CONVERGE_REQUIRE_NODEPLANE=1) and fails it for any other error, with
// the progress log of the start.
func skipOrFail(t testing.TB, err error, log string) {
	t.Helper()
	if log != "" {
		t.Log(log)
	}
	if errors.Is(err, ErrCannotRun) && os.Getenv(requireEnv) != "1" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// logWriter writes each line to a test's log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
