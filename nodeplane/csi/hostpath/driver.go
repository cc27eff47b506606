package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Driver is a running hostpath CSI driver: the open pools and the three CSI
// services. All RPCs are serialized by one lock (they are short filesystem
// operations), so concurrent calls for one volume cannot interleave; only
// the data copy of a clone, restore or snapshot runs without it, its
// records marked in pending (see copyUnlocked).
type Driver struct {
	opts    Options
	pools   []*pool
	log     *slog.Logger
	mu      sync.Mutex
	pending map[string]int // copies running into or out of a volume or snapshot key
	// copyHook, when set (by tests), runs at the start of every unlocked
	// copy.
	copyHook func()
}

// New validates opts and opens (creating when missing) every pool
// directory. The returned Driver holds one directory descriptor per pool
// until Close.
func New(opts Options) (*Driver, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	d := &Driver{opts: opts, log: slog.Default().With("driver", opts.DriverName, "node", opts.NodeID), pending: map[string]int{}}
	for _, p := range opts.Pools {
		op, err := openPool(p)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.pools = append(d.pools, op)
	}
	return d, nil
}

// Close releases the pool descriptors.
func (d *Driver) Close() error {
	var errs []error
	for _, p := range d.pools {
		errs = append(errs, p.close())
	}
	d.pools = nil
	return errors.Join(errs...)
}

// Register adds the Identity, Controller and Node services to s.
func (d *Driver) Register(s *grpc.Server) {
	csi.RegisterIdentityServer(s, &identityServer{d: d})
	csi.RegisterControllerServer(s, &controllerServer{d: d})
	csi.RegisterNodeServer(s, &nodeServer{d: d})
}

// Serve listens on opts.Endpoint (see Listen) and serves the CSI services
// until ctx is done (see ServeListener).
func (d *Driver) Serve(ctx context.Context) error {
	lis, err := d.Listen()
	if err != nil {
		return err
	}
	return d.ServeListener(ctx, lis)
}

// Listen opens the unix socket of opts.Endpoint, creating its parent
// directory and removing a stale socket file left there by a previous run
// (any other kind of file there is an error).
func (d *Driver) Listen() (net.Listener, error) {
	path, err := SocketPath(d.opts.Endpoint)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", d.opts.Endpoint, err)
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("endpoint %s: %s exists and is not a socket", d.opts.Endpoint, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("endpoint %s: removing stale socket: %w", d.opts.Endpoint, err)
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", d.opts.Endpoint, err)
	}
	return lis, nil
}

// ServeListener serves the CSI services on lis until ctx is done, then
// stops gracefully (in-flight RPCs get 10 seconds) and returns nil. It
// closes lis.
func (d *Driver) ServeListener(ctx context.Context, lis net.Listener) error {
	s := grpc.NewServer(grpc.UnaryInterceptor(d.logErrors))
	d.Register(s)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		stopped := make(chan struct{})
		go func() { s.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			s.Stop()
		}
	})
	d.log.Info("serving CSI", "endpoint", d.opts.Endpoint, "version", Version, "pools", d.poolNames())
	err := s.Serve(lis)
	close(done)
	wg.Wait() // in-flight RPCs are over before the caller closes the pools
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("endpoint %s: %w", d.opts.Endpoint, err)
}

// logErrors logs failed RPCs other than the expected NotFound answers.
func (d *Driver) logErrors(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil {
		if c := status.Code(err); c != codes.NotFound && c != codes.InvalidArgument {
			d.log.Warn("CSI call failed", "method", info.FullMethod, "code", c.String(), "error", err)
		}
	}
	return resp, err
}

func (d *Driver) poolNames() string {
	names := make([]string, len(d.pools))
	for i, p := range d.pools {
		names[i] = p.Name
	}
	return strings.Join(names, ",")
}

// poolByName returns the pool named by parameters[ParameterStoragePool], or
// the first pool when absent; an unknown name is InvalidArgument.
func (d *Driver) poolByName(params map[string]string) (*pool, error) {
	name, ok := params[ParameterStoragePool]
	if !ok {
		return d.pools[0], nil
	}
	for _, p := range d.pools {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, status.Errorf(codes.InvalidArgument, "parameter %s=%q: no such storage pool (have %s)", ParameterStoragePool, name, d.poolNames())
}

// lookup finds volume id (not yet validated) in the pools. It gives
// InvalidArgument for a malformed ID, FailedPrecondition when a pool's
// directory was replaced, NotFound when no pool holds a volume id.
func (d *Driver) lookup(id string) (*pool, *volumeMeta, error) {
	if err := ValidateVolumeID(id); err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	for _, p := range d.pools {
		if !p.mounted() {
			continue // no volume there yet
		}
		if err := p.check(); err != nil {
			return nil, nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		m, err := p.read(id)
		switch {
		case err == nil:
			return p, m, nil
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrNotVolume):
			continue
		default:
			return nil, nil, status.Error(codes.Internal, err.Error())
		}
	}
	return nil, nil, status.Errorf(codes.NotFound, "volume %s: not found in storage pools %s", id, d.poolNames())
}

// lookupReady is lookup for volumes in use: a volume still being created or
// deleted is NotFound.
func (d *Driver) lookupReady(id string) (*pool, *volumeMeta, error) {
	p, m, err := d.lookup(id)
	if err == nil && m.State != stateReady {
		return nil, nil, status.Errorf(codes.NotFound, "volume %s: in pool %s but %s", id, p.Name, m.State)
	}
	return p, m, err
}

// topology is the accessible topology of every volume of this driver.
func (d *Driver) topology() *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyKey: d.opts.NodeID}}
}

// reachable reports whether one of the topologies is this node; no
// topologies means any node.
func (d *Driver) reachable(tops []*csi.Topology) bool {
	if len(tops) == 0 {
		return true
	}
	for _, t := range tops {
		if v, ok := t.GetSegments()[TopologyKey]; ok && v == d.opts.NodeID && len(t.GetSegments()) == 1 {
			return true
		}
	}
	return false
}

func (d *Driver) csiVolume(m *volumeMeta) *csi.Volume {
	return &csi.Volume{
		VolumeId:           m.ID,
		CapacityBytes:      m.CapacityBytes,
		VolumeContext:      map[string]string{ParameterStoragePool: m.Pool},
		AccessibleTopology: []*csi.Topology{d.topology()},
		ContentSource:      contentSource{m.SourceVolumeID, m.SourceSnapshotID}.csi(),
	}
}
