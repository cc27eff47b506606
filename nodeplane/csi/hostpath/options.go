package hostpath

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// Pool is one storage pool: a name (the HostPathProvisioner CR's
// storagePools[].name) and the absolute directory holding its volumes.
type Pool struct {
	Name string
	Path string
	// Mounted: Path is a mount point another process makes (a
	// HostPathProvisioner pvcTemplate pool, mounted by its storage pool
	// worker, converge-node hostpath-pool-mounter). The driver creates
	// nothing there and serves the pool only once it is mounted, so no
	// volume lands on the disk under the mount.
	Mounted bool
}

// Options configures a Driver.
type Options struct {
	// Endpoint is the gRPC listen address, "unix:///abs/path/csi.sock"
	// (or "unix:/abs/path"). A stale socket file there is removed.
	Endpoint string
	// NodeID is this node's name, reported by NodeGetInfo and used as the
	// TopologyKey value. Required.
	NodeID string
	// DriverName is the CSI driver name (GetPluginInfo), at most 63
	// characters, DNS-1123 like. Default DefaultDriverName.
	DriverName string
	// Pools are the storage pools, in order; the first is the default
	// pool. At least one; names and paths unique.
	Pools []Pool
}

// DefaultOptions returns Options with DriverName set to DefaultDriverName
// and everything else empty.
func DefaultOptions() Options {
	return Options{DriverName: DefaultDriverName}
}

var (
	driverNameRE = regexp.MustCompile(`^[a-zA-Z][A-Za-z0-9-._]{0,61}[a-zA-Z]$`)
	poolNameRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)
)

// ParsePool parses a --storage-pool value NAME=PATH. NAME is a DNS-1123
// label or subdomain of at most 63 characters; PATH is an absolute, clean
// path that is not "/". Errors quote the value and say what was expected.
func ParsePool(s string) (Pool, error) {
	name, path, ok := strings.Cut(s, "=")
	if !ok {
		return Pool{}, fmt.Errorf("storage pool %q: want NAME=PATH", s)
	}
	if !poolNameRE.MatchString(name) {
		return Pool{}, fmt.Errorf("storage pool %q: name %q must be lower-case alphanumerics, '-' or '.', 1-63 characters, starting and ending alphanumeric", s, name)
	}
	if strings.ContainsRune(path, 0) || !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
		return Pool{}, fmt.Errorf("storage pool %q: path %q must be an absolute, clean path other than /", s, path)
	}
	return Pool{Name: name, Path: path}, nil
}

// SocketPath returns the filesystem path of a unix endpoint
// ("unix:///run/csi.sock" or "unix:/run/csi.sock" gives "/run/csi.sock").
func SocketPath(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "unix" {
		return "", fmt.Errorf("endpoint %q: want unix:///absolute/path", endpoint)
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	if u.Host != "" || !filepath.IsAbs(p) {
		return "", fmt.Errorf("endpoint %q: want unix:///absolute/path", endpoint)
	}
	return p, nil
}

// Validate checks o and returns every problem found, joined: a unix
// endpoint, a node ID of at most 128 bytes, a valid driver name, and at
// least one pool with unique names and paths.
func (o Options) Validate() error {
	var errs []error
	if o.Endpoint == "" {
		errs = append(errs, errors.New("endpoint: required (unix:///path/csi.sock)"))
	} else if _, err := SocketPath(o.Endpoint); err != nil {
		errs = append(errs, err)
	}
	if o.NodeID == "" || len(o.NodeID) > 128 || strings.ContainsRune(o.NodeID, 0) {
		errs = append(errs, fmt.Errorf("node ID %q: required, at most 128 bytes", o.NodeID))
	}
	if !driverNameRE.MatchString(o.DriverName) {
		errs = append(errs, fmt.Errorf("driver name %q: must match %s", o.DriverName, driverNameRE))
	}
	if len(o.Pools) == 0 {
		errs = append(errs, errors.New("storage pools: at least one NAME=PATH required"))
	}
	names, paths := map[string]bool{}, map[string]bool{}
	for _, p := range o.Pools {
		if _, err := ParsePool(p.Name + "=" + p.Path); err != nil {
			errs = append(errs, err)
		}
		if names[p.Name] {
			errs = append(errs, fmt.Errorf("storage pool %q: duplicate name", p.Name))
		}
		if paths[p.Path] {
			errs = append(errs, fmt.Errorf("storage pool %q: path %s already used by another pool", p.Name, p.Path))
		}
		names[p.Name], paths[p.Path] = true, true
	}
	return errors.Join(errs...)
}
