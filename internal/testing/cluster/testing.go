package cluster

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// testLockWait is how long StartForTest waits for another test process's
// cluster (test packages run in parallel under `go test ./...`).
const testLockWait = 20 * time.Minute

// StartForTest starts the machine's cluster for t with DefaultOptions (a
// fresh work directory, progress in t's log) and stops it in t.Cleanup,
// logging the tails of the kubelet's and containerd's logs first when t
// failed. It skips t, or fails it when CONVERGE_REQUIRE_NODEPLANE=1 (CI),
// when it cannot run here: not root, containerd, ctr or runc missing
// (apt-get install -y containerd runc), or a binary missing from bin/
// (naming the make target that builds it). It waits up to 20 minutes
// while another test process holds the cluster, and fails when a cluster
// left running by `make cluster` holds it.
func StartForTest(t testing.TB) *Cluster {
	t.Helper()
	bin, err := controlplane.BinDir()
	if err == nil {
		err = Check(bin)
	}
	if err != nil {
		msg := "the local cluster cannot start here: " + strings.ReplaceAll(err.Error(), "\n", "; ")
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := DefaultOptions()
	opts.BinDir = bin
	opts.LockWait = testLockWait
	opts.Progress = testWriter{t}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, comp := range []string{"kubelet", "containerd"} {
				t.Logf("%s log tail (%s):\n%s", comp, c.LogPath(comp), c.LogTail(comp, 4000))
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	return c
}

// testWriter writes each line to t's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
