package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// Binaries are the files Start needs in Options.BinDir, with the make
// target that builds them.
var Binaries = map[string]string{
	"etcd":                    "make controlplane",
	"kube-apiserver":          "make controlplane",
	"kube-controller-manager": "make controlplane",
	"kube-scheduler":          "make cluster-bins",
	"kubelet":                 "make cluster-bins",
	"kube-proxy":              "make cluster-bins",
	"cni/bridge":              "make cni",
	"cni/host-local":          "make cni",
	"cni/loopback":            "make cni",
}

// HostCommands are the programs Start runs from PATH, with the Debian
// packages that hold them.
var HostCommands = map[string]string{
	"containerd": "containerd",
	"ctr":        "containerd",
	"runc":       "runc",
	"ip":         "iproute2",
	"nft":        "nftables", // kube-proxy's nftables mode
	"go":         "(the Go toolchain, to fetch the pause image's source)",
	"gcc":        "gcc",
}

// Cluster is a running single-node cluster started by Start.
type Cluster struct {
	// Config is an admin (system:masters) rest.Config for the apiserver
	// at https://NodeIP:APIServerPort, with client-side throttling off.
	Config *rest.Config
	// Kubeconfig is the path of the admin kubeconfig (Config as a file).
	Kubeconfig string
	// NodeName is the name of the one Node.
	NodeName string
	// APIServerAddress is host:port of the apiserver, NodeIP:443,
	// reached from the host network and the pod network alike (pods'
	// in-cluster config dials the `kubernetes` Service's ClusterIP, which
	// kube-proxy leads here).
	APIServerAddress string
	// Dir is the work directory; logs are in Dir/logs/<component>.log.
	Dir string
	// Timings are the durations of Start's phases.
	Timings Timings

	opts  Options
	st    *state
	stMu  sync.Mutex
	lock  *hostLock
	procs map[string]*running
	start time.Time
	stop  sync.Once
	err   error
}

// Timings measure Start, each from the moment it held the machine's
// cluster lock.
type Timings struct {
	// Cleanup is the time spent removing a previous run's leftovers.
	Cleanup time.Duration
	// EtcdHealthy, APIServerReady, ContainerdReady and ImagesImported
	// are when etcd's /health answered true, kube-apiserver's /readyz
	// 200, containerd its socket, and the sandbox image was imported.
	EtcdHealthy, APIServerReady, ContainerdReady, ImagesImported time.Duration
	// NodeReady is when the Node reported Ready.
	NodeReady time.Duration
	// DefaultServiceAccount is when the default ServiceAccount of the
	// default namespace existed (pods are accepted from then on): Start's
	// total.
	DefaultServiceAccount time.Duration
}

// Check reports, as one error naming each missing piece and how to get
// it, whether Start can run here: root, the binaries in bin, and the host
// commands. It gives nil when all is present.
func Check(bin string) error {
	var missing []error
	if os.Geteuid() != 0 {
		missing = append(missing, errors.New("not root (the cluster adds an address, mounts, cgroups and runs containerd): run as root"))
	}
	for _, f := range sortedKeys(Binaries) {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			missing = append(missing, fmt.Errorf("%s not in %s: run `%s`", f, bin, Binaries[f]))
		}
	}
	var pkgs []string
	for _, c := range sortedKeys(HostCommands) {
		if _, err := exec.LookPath(c); err != nil {
			if c == "go" {
				missing = append(missing, errors.New("go not in PATH (the pause image's source is fetched at start)"))
				continue
			}
			if !slices.Contains(pkgs, HostCommands[c]) {
				pkgs = append(pkgs, HostCommands[c])
			}
		}
	}
	if len(pkgs) > 0 {
		missing = append(missing, fmt.Errorf("%v not installed: apt-get install -y %s", pkgs, strings.Join(pkgs, " ")))
	}
	return errors.Join(missing...)
}

// Start starts a cluster as described in the package doc and returns once
// the Node is Ready and the default ServiceAccount exists. It takes the
// machine's cluster lock (failing with ErrRunning, naming the holder, when
// another cluster runs), cleans up what a previous run that died left
// behind, and on failure undoes what it did and gives the error with the
// failing component's log tail. Stop the cluster with Stop.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if opts.BinDir == "" {
		bin, err := controlplane.BinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = bin
	}
	bin, err := filepath.Abs(opts.BinDir)
	if err != nil {
		return nil, err
	}
	opts.BinDir = bin
	if err := Check(opts.BinDir); err != nil {
		return nil, fmt.Errorf("cluster: cannot start here:\n%w", err)
	}
	c := &Cluster{opts: opts, NodeName: opts.NodeName, APIServerAddress: hostPort(APIServerPort),
		procs: map[string]*running{}}
	lock, err := acquireLock(opts.LockWait)
	if err != nil {
		return nil, err
	}
	c.lock, c.start = lock, time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := c.cleanupPrevious(); err != nil {
		lock.release()
		return nil, err
	}
	c.Timings.Cleanup = time.Since(c.start)
	if err := c.prepareDir(); err != nil {
		if c.st != nil {
			if serr := c.Stop(); serr != nil {
				err = fmt.Errorf("%w\n(and cleaning up: %v)", err, serr)
			}
		} else {
			lock.release()
		}
		return nil, err
	}
	if err := c.up(ctx); err != nil {
		c.progress("start failed: %v; cleaning up", err)
		if serr := c.Stop(); serr != nil {
			err = fmt.Errorf("%w\n(and cleaning up: %v)", err, serr)
		}
		return nil, err
	}
	if opts.Detach {
		o := selfOwner(c.Dir)
		o.Detached = true
		if err := writeOwner(o); err != nil {
			return c, fmt.Errorf("cluster: %w", err)
		}
		c.lock.release()
		c.lock = nil
	}
	return c, nil
}

// progress writes one progress line with the time since Start began.
func (c *Cluster) progress(format string, args ...any) {
	if c.opts.Progress == nil {
		return
	}
	fmt.Fprintf(c.opts.Progress, "cluster: %s (%.1fs)\n", fmt.Sprintf(format, args...), time.Since(c.start).Seconds())
}

// record adds a started process to the state record.
func (c *Cluster) record(r *running) error {
	c.stMu.Lock()
	defer c.stMu.Unlock()
	c.procs[r.Name] = r
	c.st.Procs = append(c.st.Procs, r.proc)
	return c.st.save()
}

// launch starts a component with its log in Dir/logs and records it.
func (c *Cluster) launch(name string, argv []string) (*running, error) {
	r, err := launch(name, argv, nil, c.LogPath(name), c.opts.Detach)
	if err != nil {
		return nil, err
	}
	if err := c.record(r); err != nil {
		return r, err
	}
	return r, nil
}

// LogPath gives the log file of a component ("etcd", "kube-apiserver",
// "kube-controller-manager", "kube-scheduler", "containerd", "kubelet").
func (c *Cluster) LogPath(component string) string {
	return filepath.Join(c.Dir, "logs", component+".log")
}

// LogTail gives the last n bytes of a component's log.
func (c *Cluster) LogTail(component string, n int) string {
	return tail(c.LogPath(component), n)
}

// ImportImage imports an image archive (docker-archive as tarball.Write
// and WriteBinaryImage write it, or an OCI archive) into the cluster's
// containerd, where pods find it without pulling (imagePullPolicy Never
// or IfNotPresent).
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	return importImage(ctx, archive)
}

// Stop kills the cluster's processes (by recorded PID, then whatever
// still names the work directory or LockDir, then the pods' processes in
// the kubepods cgroups), unmounts everything below the kubelet root, the
// work directory and LockDir, removes the node address, the bridge, the
// kubepods cgroups, the KUBE-* iptables chains and the host directories
// Start created, restores the sysctls, removes the work directory (or
// empties it but for logs/ with KeepLogs) and releases the lock. Every
// step runs even when one fails; the errors are joined. Safe to call
// twice.
func (c *Cluster) Stop() error {
	c.stop.Do(func() {
		if c.lock == nil {
			l, err := acquireLock(0)
			if err != nil {
				c.err = err
				return
			}
			c.lock = l
		}
		defer func() { c.lock.release(); c.lock = nil }()
		start := time.Now()
		if c.st != nil {
			c.err = teardown(c.st, c.opts.Progress)
		}
		if c.err != nil {
			// Keep the owner record: the next Start or StopRunning retries.
			c.err = fmt.Errorf("cluster: stopping (the next Start or `make cluster-stop` retries the cleanup): %w", c.err)
			return
		}
		if err := os.Remove(ownerPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.err = err
		}
		if c.opts.Progress != nil {
			fmt.Fprintf(c.opts.Progress, "cluster: stopped in %.1fs\n", time.Since(start).Seconds())
		}
	})
	return c.err
}

// StopRunning stops the machine's cluster from any process (`make
// cluster-stop`): the one owner.json names, or, with no record, whatever
// leftovers it can identify. It fails, naming the holder, while a live
// process (a test) holds the cluster lock. It reports progress to
// progress (nil: none) and gives nil when nothing was running.
func StopRunning(progress io.Writer) error {
	lock, err := acquireLock(0)
	if err != nil {
		return err
	}
	defer lock.release()
	o, err := readOwner()
	if err != nil {
		return err
	}
	var st *state
	if o != nil {
		if st, err = loadState(o.Dir); err != nil {
			return err
		}
		if st == nil {
			st = bareState(DefaultKubeletRootDir)
			st.Dir = o.Dir
		}
	} else if leftovers() {
		st = bareState(DefaultKubeletRootDir)
	} else {
		return nil
	}
	if err := teardown(st, progress); err != nil {
		return err
	}
	if err := os.Remove(ownerPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
