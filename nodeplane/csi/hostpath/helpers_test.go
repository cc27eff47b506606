package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// requireRoot skips t when not root (bind mounts and loop devices need
// CAP_SYS_ADMIN), or fails it when CONVERGE_REQUIRE_NODEPLANE=1.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
		t.Fatal("hostpath CSI node tests need root (bind mounts, loop devices) and CONVERGE_REQUIRE_NODEPLANE=1 is set")
	}
	t.Skip("hostpath CSI node tests need root (bind mounts, loop devices); set CONVERGE_REQUIRE_NODEPLANE=1 to make this a failure")
}

// testOptions returns Options for a driver on a socket and one pool under
// dir.
func testOptions(dir string) Options {
	o := DefaultOptions()
	o.Endpoint = "unix://" + filepath.Join(dir, "csi.sock")
	o.NodeID = "node-a"
	o.Pools = []Pool{{Name: "local", Path: filepath.Join(dir, "pool")}}
	return o
}

// runningDriver is a Driver serving on its socket, with a client connection.
type runningDriver struct {
	*Driver
	conn *grpc.ClientConn
	stop func()
}

func (r *runningDriver) controller() csi.ControllerClient { return csi.NewControllerClient(r.conn) }
func (r *runningDriver) node() csi.NodeClient             { return csi.NewNodeClient(r.conn) }
func (r *runningDriver) identity() csi.IdentityClient     { return csi.NewIdentityClient(r.conn) }

// startDriver starts a real Driver with opts on its unix socket; it is
// stopped (and its pools closed) by the returned stop or at cleanup.
func startDriver(t testing.TB, opts Options) *runningDriver {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := d.Listen()
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.ServeListener(ctx, lis) }()
	conn, err := grpc.NewClient(opts.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		d.Close()
	}
	t.Cleanup(stop)
	return &runningDriver{Driver: d, conn: conn, stop: stop}
}
