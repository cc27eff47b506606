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
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
	"go":         "(the Go toolchain, to build the pause image)",
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
	// APIServerAddress is host:port of the apiserver as pods reach it,
	// on the host network and the pod network alike: NodeIP:443, also
	// the `kubernetes` Service's ClusterIP and port, so the
	// KUBERNETES_SERVICE_HOST/PORT the kubelet injects work unchanged.
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
				missing = append(missing, errors.New("go not in PATH (the pause image is built at start)"))
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

// cleanupPrevious undoes what a previous Start left, found through
// owner.json, refusing while a detached cluster still runs; with no owner
// record it removes what it can identify as a cluster's by name alone.
func (c *Cluster) cleanupPrevious() error {
	o, err := readOwner()
	if err != nil {
		return err
	}
	if o != nil {
		prev, err := loadState(o.Dir)
		if err != nil {
			return err
		}
		if prev != nil && o.Detached && anyAlive(prev.Procs) {
			return fmt.Errorf("cluster: %w: started by %s; stop it with `make cluster-stop` (or cluster.StopRunning)", ErrRunning, o)
		}
		c.progress("cleaning up after a previous cluster (%s)", o)
		if prev == nil {
			prev = bareState(c.opts.KubeletRootDir)
			prev.Dir = o.Dir
		}
		if err := teardown(prev, c.opts.Progress); err != nil {
			return fmt.Errorf("cluster: cleaning up after the previous cluster in %s: %w", o.Dir, err)
		}
		if err := os.Remove(ownerPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := checkForeignKubelet(); err != nil {
		return err
	}
	if leftovers() {
		c.progress("removing leftovers of an unrecorded cluster (address %s, bridge %s, kubepods cgroups, processes using %s)", NodeIP, BridgeName, LockDir)
		if err := teardown(bareState(c.opts.KubeletRootDir), c.opts.Progress); err != nil {
			return fmt.Errorf("cluster: removing leftovers: %w", err)
		}
	}
	return nil
}

// leftovers reports whether anything of a cluster is on the host.
func leftovers() bool {
	if nodeIPPresent() || linkExists(BridgeName) || len(kubepodsCgroups()) > 0 || len(procsMentioning(LockDir)) > 0 {
		return true
	}
	m, _ := mountsUnder(LockDir)
	return len(m) > 0
}

// checkForeignKubelet fails when a kubelet that is not a cluster's of
// this package runs here (its pods' cgroups and mounts are not ours to
// clean, and two kubelets cannot share the host).
func checkForeignKubelet() error {
	ours := map[int]bool{}
	for _, p := range procsMentioning(LockDir) {
		ours[p.PID] = true
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || ours[pid] {
			continue
		}
		if _, live := startTime(pid); !live {
			continue // gone, or a zombie waiting for its parent
		}
		if comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); err == nil && strings.TrimSpace(string(comm)) == "kubelet" {
			return fmt.Errorf("cluster: another kubelet runs on this machine (pid %d: %s), not one of this package's clusters: stop it first", pid, cmdlineOf(pid))
		}
	}
	return nil
}

// bareState describes a cluster without a record, for cleaning up what
// can be told ours by name: the kubelet root directory only when it
// carries our marker.
func bareState(kubeletRoot string) *state {
	st := &state{}
	if _, err := os.Stat(filepath.Join(kubeletRoot, kubeletRootMarker)); err == nil {
		st.KubeletRootDir = kubeletRoot
	}
	return st
}

// anyAlive reports whether one of ps still runs.
func anyAlive(ps []proc) bool {
	for _, p := range ps {
		if p.alive() {
			return true
		}
	}
	return false
}

// prepareDir makes the work directory (fresh), the state record and the
// owner record, and claims the host directories the daemons will create.
func (c *Cluster) prepareDir() error {
	o := c.opts
	st := &state{BinDir: o.BinDir, NodeName: o.NodeName, KubeletRootDir: filepath.Clean(o.KubeletRootDir), KeepLogs: o.KeepLogs}
	if err := checkKubeletRoot(st.KubeletRootDir); err != nil {
		return err
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "converge-cluster-")
		if err != nil {
			return err
		}
		st.Dir, st.TempDir = d, true
	} else {
		d, err := filepath.Abs(o.Dir)
		if err != nil {
			return err
		}
		if err := emptyWorkDir(d); err != nil {
			return err
		}
		st.Dir = d
	}
	c.st, c.Dir = st, st.Dir
	if err := os.MkdirAll(filepath.Join(st.Dir, "logs"), 0o755); err != nil {
		return err
	}
	if err := st.save(); err != nil {
		return err
	}
	if err := writeOwner(selfOwner(st.Dir)); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	for _, p := range []string{st.KubeletRootDir, shimSocketDir, "/var/log/containers", cniResultsDir, flexVolumeDefaultDir} {
		if err := st.claim(p); err != nil {
			return err
		}
	}
	saved, err := readSysctls()
	if err != nil {
		return err
	}
	st.Sysctls = saved
	return st.save()
}

// kubeletRootMarker marks a kubelet root directory as this package's.
const kubeletRootMarker = ".converge-cluster"

// checkKubeletRoot refuses a non-empty kubelet root directory without our
// marker (someone else's kubelet state), and writes the marker.
func checkKubeletRoot(dir string) error {
	ents, err := os.ReadDir(dir)
	if err == nil && len(ents) > 0 {
		if _, err := os.Stat(filepath.Join(dir, kubeletRootMarker)); err != nil {
			return fmt.Errorf("cluster: the kubelet root directory %s is not empty and is not this package's (no %s): move it away or set Options.KubeletRootDir", dir, kubeletRootMarker)
		}
		if err := unmountAll(dir); err != nil {
			return err
		}
		for _, e := range ents {
			if err := removeAllUnmounted(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// emptyWorkDir makes dir exist and be empty; a non-empty dir must hold a
// cluster's state.json (it is then the work directory of a cluster
// already stopped or cleaned up).
func emptyWorkDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return nil
	}
	prev, err := loadState(dir)
	if err != nil {
		return err
	}
	if prev == nil {
		onlyLogs := len(ents) == 1 && ents[0].Name() == "logs"
		if !onlyLogs {
			return fmt.Errorf("cluster: work directory %s is not empty and holds no cluster state (state.json): choose another Options.Dir", dir)
		}
	} else if anyAlive(prev.Procs) {
		if err := teardown(prev, nil); err != nil {
			return err
		}
	}
	if err := unmountAll(dir); err != nil {
		return err
	}
	for _, e := range ents {
		if err := removeAllUnmounted(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
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

// up starts the components: etcd then kube-apiserver then the controller
// manager and the scheduler, alongside containerd then the kubelet, and
// the sandbox image built and imported meanwhile; then it waits for the
// Node to be Ready and the default ServiceAccount to exist.
func (c *Cluster) up(ctx context.Context) error {
	st := c.st
	p := newPKIFiles(filepath.Join(st.Dir, "pki"))
	server := "https://" + c.APIServerAddress
	if err := writePKI(p, st.NodeName, server); err != nil {
		return fmt.Errorf("cluster: PKI: %w", err)
	}
	c.Kubeconfig = p.adminConfig
	cfg, err := clientcmd.BuildConfigFromFlags("", p.adminConfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	c.Config = cfg
	cniConf := filepath.Join(st.Dir, "cni", "net.d")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-"+NetworkName+".conflist"), []byte(cniConflist(filepath.Join(st.Dir, "cni", "ipam"))), 0o644); err != nil {
		return err
	}
	containerdConf := filepath.Join(st.Dir, "containerd.toml")
	if err := writeContainerdConfig(containerdConf, st.Dir, filepath.Join(st.BinDir, "cni"), cniConf); err != nil {
		return err
	}
	kp := kubeletPaths{config: filepath.Join(st.Dir, "kubelet.json"), podLogs: filepath.Join(st.Dir, "pod-logs"), volumePlugins: filepath.Join(st.Dir, "volume-plugins")}
	if err := writeKubeletConfig(kp, p); err != nil {
		return err
	}
	if err := os.MkdirAll(st.KubeletRootDir, 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(st.KubeletRootDir, kubeletRootMarker), []byte(st.Dir+"\n"), 0o644); err != nil {
		return err
	}
	if err := addNodeIP(); err != nil {
		return fmt.Errorf("cluster: node address: %w", err)
	}
	c.progress("PKI, configuration and node address %s/32 on lo ready", NodeIP)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.upControlPlane(gctx, p) })
	containerdUp := make(chan struct{})
	g.Go(func() error {
		r, err := c.launch("containerd", []string{"containerd", "--config", containerdConf})
		if err != nil {
			return err
		}
		if err := waitContainerd(gctx, r); err != nil {
			return err
		}
		c.Timings.ContainerdReady = time.Since(c.start)
		c.progress("containerd answers on %s", containerdSocket)
		close(containerdUp)
		if _, err := c.launch("kubelet", kubeletArgs(st.BinDir, kp, p, st.KubeletRootDir, st.NodeName)); err != nil {
			return err
		}
		c.progress("kubelet started")
		return nil
	})
	g.Go(func() error {
		archive := filepath.Join(st.Dir, "images", "pause.tar")
		if err := BuildGoImage(gctx, "./internal/testing/cluster/pause", PauseImage, archive); err != nil {
			return fmt.Errorf("cluster: sandbox image: %w", err)
		}
		select {
		case <-containerdUp:
		case <-gctx.Done():
			return gctx.Err()
		}
		if err := importImage(gctx, archive); err != nil {
			return err
		}
		c.Timings.ImagesImported = time.Since(c.start)
		c.progress("sandbox image %s built and imported", PauseImage)
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if err := c.waitNodeReady(ctx); err != nil {
		return err
	}
	c.Timings.NodeReady = time.Since(c.start)
	c.progress("node %s Ready", st.NodeName)
	if err := c.waitDefaultServiceAccount(ctx); err != nil {
		return err
	}
	c.Timings.DefaultServiceAccount = time.Since(c.start)
	c.progress("default ServiceAccount exists: cluster up, kubeconfig %s", c.Kubeconfig)
	return nil
}

// upControlPlane starts etcd, waits for its health, starts kube-apiserver,
// waits for /readyz, then starts the controller manager and the scheduler.
func (c *Cluster) upControlPlane(ctx context.Context, p pkiFiles) error {
	st := c.st
	etcd, err := c.launch("etcd", etcdArgs(st.BinDir, st.Dir))
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, etcd, "http://"+hostPort(EtcdPort)+"/health", nil); err != nil {
		return err
	}
	c.Timings.EtcdHealthy = time.Since(c.start)
	c.progress("etcd healthy on %s", hostPort(EtcdPort))
	apiserver, err := c.launch("kube-apiserver", apiserverArgs(st.BinDir, st.Dir, p))
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, apiserver, "https://"+c.APIServerAddress+"/readyz", c.Config); err != nil {
		return err
	}
	c.Timings.APIServerReady = time.Since(c.start)
	c.progress("kube-apiserver ready on %s", c.APIServerAddress)
	if _, err := c.launch("kube-controller-manager", controllerManagerArgs(st.BinDir, st.Dir, p)); err != nil {
		return err
	}
	if _, err := c.launch("kube-scheduler", schedulerArgs(st.BinDir, st.Dir, p)); err != nil {
		return err
	}
	c.progress("kube-controller-manager and kube-scheduler started")
	return nil
}

// processExited fails with the log tail of the first component that has
// exited, if any.
func (c *Cluster) processExited() error {
	c.stMu.Lock()
	defer c.stMu.Unlock()
	for name, r := range c.procs {
		if done, err := r.exited(); done {
			return fmt.Errorf("%s exited (%v); log %s:\n%s", name, err, r.log, tail(r.log, 3000))
		}
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
