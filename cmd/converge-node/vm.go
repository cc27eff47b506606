package main

// converge-node vm: the VM agent (virt-handler and virt-launcher roles) on
// libvirt. It serves the VMIs of an API server (--kubeconfig: the API
// source, node registration) or of YAML files (--vmi-file).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/network/netattach"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/console"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/kvmprobe"
	"github.com/converge-dev/converge/nodeplane/vm/libvirt"
	"github.com/converge-dev/converge/nodeplane/vm/vmdisks"
)

func init() { subcommands = append(subcommands, newVMCommand) }

// vmFlags are the flags of converge-node vm.
type vmFlags struct {
	nodeName    string
	libvirtURI  string
	kubeconfig  string
	inCluster   bool
	stateDir    string
	domainType  string
	emulator    string
	machineType string
	smbios      domain.SMBIOS
	podBridge   string
	bridges     map[string]string
	vmiFiles    []string
	resync      time.Duration
	reservedMem string
	heartbeat   time.Duration
	cniBinDir   string
	cniConfDir  string
	cniCacheDir string
	cniHostNS   string
	consoleBind string
	consoleAdv  string
	probeTime   time.Duration
	connectWait time.Duration
	podNet      podNetworkFlags
	pools       []string
	csiDriver   string
	qemuImg     string
}

func newVMCommand() *cobra.Command {
	host, _ := os.Hostname()
	f := &vmFlags{
		nodeName:    host,
		libvirtURI:  "qemu:///system",
		stateDir:    "/var/lib/converge/vm",
		emulator:    "/usr/bin/qemu-system-x86_64",
		machineType: "q35",
		smbios:      domain.DefaultSMBIOS,
		resync:      30 * time.Second,
		reservedMem: "256Mi",
		heartbeat:   agent.DefaultNodeOptions("").Interval,
		cniBinDir:   netattach.DefaultOptions().BinDirs[0],
		consoleBind: console.DefaultOptions("").BindAddress,
		probeTime:   kvmprobe.DefaultGuestOptions().Timeout,
		connectWait: 2 * time.Minute,
		csiDriver:   importcontroller.DefaultOptions().DriverName,
		qemuImg:     vmdisks.DefaultOptions("").QemuImg,
	}
	cmd := &cobra.Command{
		Use:   "vm",
		Short: "run the VMs of this node on libvirt (KubeVirt's virt-handler and virt-launcher roles)",
		Long: `vm converges this node's libvirt domains on the VirtualMachineInstances
assigned to it and reports their status (phase, Ready, interfaces).

The VMIs come from exactly one of:

  --kubeconfig FILE  the API server (or --in-cluster, in a DaemonSet: the
                     Pod's ServiceAccount): the agent watches the
                     VirtualMachineInstances whose status.nodeName is
                     --node-name, writes their status (phase, Ready,
                     interfaces) and holds them with the finalizer
                     foregroundDeleteVirtualMachine until their domain is
                     gone. It registers the Node --node-name (creating it
                     when no kubelet did), labels it converge.dev/vm-agent=true
                     and annotates what it offers VMs
                     (vm.converge.dev/allocatable: every CPU and MemTotal
                     minus --reserved-memory) every --heartbeat, which is
                     where converge-controller's scheduler places VMIs.
  --vmi-file FILE    YAML files (several documents per file allowed); one
                     line is printed per status change.

Interfaces with bridge binding on a multus network whose
NetworkAttachmentDefinition (from the API, or <--cni-conf-dir>/<namespace>/
<name>.conf with --vmi-file) is a CNI "bridge" config get KubeVirt's
bridge binding: the CNI plugins of --cni-bin-dir run ADD into a network
namespace per VMI (cvm-<uid>) with the NIC's MAC, and the VM's tap joins
the plugin's interface there; DEL runs when the domain is gone.

Disks: hostDisk paths as they are; persistentVolumeClaim and dataVolume
volumes (with --kubeconfig) through the claim's bound PersistentVolume to the
hostpath CSI driver's volume on this node (--csi-driver-name, the pools of
--storage-pool, as converge-node hostpath-csi and cdi-importer have them): a
claim not bound yet or a DataVolume still importing keeps the VMI Scheduled
(VolumesNotReady) until it is. The volumes KubeVirt makes in its
virt-launcher pod the agent makes under <--state-dir>/vmis/<namespace>_<name>_<uid>/
before the domain is defined, and removes once it is gone: containerDisk
(pulled from its registry, cached by digest under <--state-dir>/containerdisks,
booted from a qcow2 overlay), emptyDisk (a sparse qcow2), cloudInitNoCloud and
cloudInitConfigDrive, secret and configMap (ISO 9660 images); Secrets and
ConfigMaps are read from the API (--kubeconfig), so with --vmi-file only
inline cloud-init data works. Needs qemu-img (--qemu-img).

With --kubeconfig the agent also serves the VMIs' serial consoles on
--console-bind-address over TLS (converge vm console NAME), publishing the
address and its certificate's SHA-256 on the Node.

Stopping the command leaves the domains running, as a virt-handler restart
does; a new run adopts them. When libvirtd restarts, the agent reconnects.
At start it waits up to --libvirt-connect-timeout for libvirtd (the
converge-node libvirtd container of the same pod starts beside it).

Without --domain-type the agent probes KVM on this node (never trusting
/dev/kvm's mere presence): the CPU's vmx/svm flags, the kvm module behind
/dev/kvm (kvm_pvm runs only PVM guest kernels) and a probe guest run by
--emulator under /dev/kvm through real, protected and long mode and timer
interrupts, killed after --kvm-probe-timeout. Domains are of type kvm only
when all of that allows it, else qemu (TCG). The decision and its reasons go
to the log and, with --kubeconfig, to the Node's condition converge.dev/KVM.
Use --libvirt-uri test:///default --domain-type test --emulator "" for
libvirt's test driver.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runVM(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodeName, "node-name", f.nodeName, "this node's name, reported in status.nodeName")
	fl.StringVar(&f.libvirtURI, "libvirt-uri", f.libvirtURI, "libvirt connection URI")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the API server whose VMIs this node runs (or use --in-cluster or --vmi-file)")
	fl.BoolVar(&f.inCluster, "in-cluster", false, "use the in-cluster config of the Pod's ServiceAccount as the API source (converge-node vm in a DaemonSet)")
	fl.StringVar(&f.reservedMem, "reserved-memory", f.reservedMem, "memory kept for the host: the node offers VMs MemTotal minus this (with --kubeconfig)")
	fl.DurationVar(&f.heartbeat, "heartbeat", f.heartbeat, "how often the Node registration (label, allocatable, Ready when no kubelet) is renewed (with --kubeconfig)")
	fl.StringVar(&f.stateDir, "state-dir", f.stateDir, "the agent's directory; serial console logs go to <state-dir>/serial")
	fl.StringVar(&f.domainType, "domain-type", "", "libvirt domain type: kvm, qemu (TCG) or test; empty probes KVM on this node")
	fl.DurationVar(&f.probeTime, "kvm-probe-timeout", f.probeTime, "time the KVM probe guest gets before it is killed (and the node uses TCG)")
	fl.DurationVar(&f.connectWait, "libvirt-connect-timeout", f.connectWait, "how long to retry the first connection to libvirtd at start")
	fl.StringVar(&f.emulator, "emulator", f.emulator, "QEMU binary (also runs the KVM probe guest); empty leaves it to libvirt")
	fl.StringVar(&f.machineType, "machine-type", f.machineType, "machine type when a VMI sets none")
	fl.StringVar(&f.smbios.Manufacturer, "smbios-manufacturer", f.smbios.Manufacturer, "SMBIOS system manufacturer of every guest (KubeVirt CR spec.configuration.smbios.manufacturer)")
	fl.StringVar(&f.smbios.Family, "smbios-family", f.smbios.Family, "SMBIOS system family of every guest (smbios.family)")
	fl.StringVar(&f.smbios.Product, "smbios-product", f.smbios.Product, "SMBIOS system product of every guest (smbios.product)")
	fl.StringVar(&f.smbios.SKU, "smbios-sku", f.smbios.SKU, "SMBIOS system SKU of every guest (smbios.sku)")
	fl.StringVar(&f.smbios.Version, "smbios-version", f.smbios.Version, "SMBIOS system version of every guest (smbios.version)")
	fl.StringVar(&f.podBridge, "pod-bridge", "", "Linux bridge for VMI interfaces on the pod network (empty: refused)")
	fl.StringToStringVar(&f.bridges, "network-bridge", nil, "Linux bridge per multus networkName, as name=bridge (repeatable)")
	fl.StringArrayVar(&f.vmiFiles, "vmi-file", nil, "YAML file of VirtualMachineInstances for this node (repeatable; or use --kubeconfig)")
	fl.DurationVar(&f.resync, "resync", f.resync, "full re-read of libvirt at least this often")
	fl.StringVar(&f.cniBinDir, "cni-bin-dir", f.cniBinDir, "directory of the CNI plugins the agent runs (in the converge-node image: /opt/cni/bin; on a host, where converge-node cni-install puts them)")
	fl.StringVar(&f.cniConfDir, "cni-conf-dir", "", "with --vmi-file: directory of NetworkAttachmentDefinition configs as <namespace>/<name>.conf (empty: no CNI networks)")
	fl.StringVar(&f.cniCacheDir, "cni-cache-dir", "", "libcni's cache of attachments, for DEL after a crash (default <state-dir>/cni)")
	fl.StringVar(&f.cniHostNS, "cni-host-netns", "", "network namespace path the CNI plugins run in (where libvirtd runs; default: the agent's own)")
	fl.StringVar(&f.consoleBind, "console-bind-address", f.consoleBind, "with --kubeconfig: host:port of the serial console server (empty: none)")
	fl.StringVar(&f.consoleAdv, "console-advertise-address", "", "host:port clients dial for consoles, published on the Node (default: the bound host, else the Node's InternalIP)")
	f.podNet.register(fl)
	fl.StringArrayVar(&f.pools, "storage-pool", nil, "storage pool NAME=PATH of the hostpath CSI driver on this node, where PVC and DataVolume disks are (repeatable; the first is the default; as converge-node hostpath-csi's)")
	fl.StringVar(&f.csiDriver, "csi-driver-name", f.csiDriver, "CSI driver of the PersistentVolumes whose disks VMIs use")
	fl.StringVar(&f.qemuImg, "qemu-img", f.qemuImg, "qemu-img binary (emptyDisk images, containerDisk overlays)")
	return cmd
}

func runVM(cmd *cobra.Command, f *vmFlags) error {
	sources := 0
	for _, set := range []bool{f.kubeconfig != "", f.inCluster, len(f.vmiFiles) > 0} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return errors.New("--kubeconfig, --in-cluster or --vmi-file: exactly one source of VirtualMachineInstances is required")
	}
	api := f.kubeconfig != "" || f.inCluster
	if f.nodeName == "" {
		return errors.New("--node-name: required (the host name is unknown)")
	}
	var vmis []*kubevirtv1.VirtualMachineInstance
	for _, path := range f.vmiFiles {
		v, err := readVMIFile(path)
		if err != nil {
			return err
		}
		vmis = append(vmis, v...)
	}
	var reserved resource.Quantity
	var cfg *rest.Config
	if api {
		q, err := resource.ParseQuantity(f.reservedMem)
		if err != nil || q.Sign() < 0 {
			return fmt.Errorf("--reserved-memory %q: expected a non-negative quantity such as 512Mi", f.reservedMem)
		}
		reserved = q
		if f.inCluster {
			if cfg, err = rest.InClusterConfig(); err != nil {
				return fmt.Errorf("--in-cluster: %w", err)
			}
		} else if cfg, err = clientcmd.BuildConfigFromFlags("", f.kubeconfig); err != nil {
			return fmt.Errorf("--kubeconfig %s: %w", f.kubeconfig, err)
		}
	}
	switch f.domainType {
	case "", kvmprobe.DomainTypeKVM, kvmprobe.DomainTypeQEMU, "test":
	default:
		return fmt.Errorf("--domain-type %q: expected kvm, qemu, test or empty (probe KVM)", f.domainType)
	}
	opts := agent.DefaultOptions(f.nodeName)
	opts.Domain.Emulator, opts.Domain.MachineType = f.emulator, f.machineType
	smbios := f.smbios
	opts.Domain.SMBIOS = &smbios
	if f.stateDir != "" && f.domainType != "test" {
		dir := filepath.Join(f.stateDir, "serial")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("--state-dir: %w", err)
		}
		opts.Domain.SerialLogDir = dir
	}
	opts.Domain.ResolveBridge = bridgeResolver(f.podBridge, f.bridges)
	var pools []hostpath.Pool
	for _, p := range f.pools {
		pool, err := hostpath.ParsePool(p)
		if err != nil {
			return fmt.Errorf("--storage-pool: %w", err)
		}
		pools = append(pools, pool)
	}
	var disks *vmdisks.Options // nil: no state directory, no prepared volumes
	if f.stateDir != "" {
		abs, err := filepath.Abs(f.stateDir)
		if err != nil {
			return fmt.Errorf("--state-dir: %w", err)
		}
		o := vmdisks.DefaultOptions(abs)
		o.QemuImg = f.qemuImg
		disks = &o
	}
	// JSON lines on the command's error stream (stderr)
	errOut := zapcore.Lock(zapcore.AddSync(cmd.ErrOrStderr()))
	zl := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), errOut, zap.InfoLevel),
		zap.ErrorOutput(errOut), zap.AddCaller())
	defer func() { _ = zl.Sync() }()
	opts.Log = zapr.NewLogger(zl).WithName("vm")
	if disks != nil {
		disks.Log = opts.Log.WithName("disks")
	}

	// The probe (seconds at most) runs while libvirtd may still be starting.
	probed := make(chan kvmprobe.Result, 1)
	go func() { probed <- decideDomainType(cmd.Context(), f) }()
	conn, err := connectLibvirt(cmd.Context(), f.libvirtURI, f.connectWait, opts.Log)
	if err != nil {
		return err
	}
	defer conn.Close()
	kvm := <-probed
	opts.Domain.DomainType = kvm.DomainType
	opts.Log.Info("domain type", "type", kvm.DomainType, "reason", kvm.Reason, "decidedBy", kvm.DecidedBy, "message", kvm.Message)
	if api {
		return runVMFromAPI(cmd.Context(), f, cfg, reserved, conn, opts, kvm, disks, pools)
	}
	var nads netattach.ConfigSource
	if f.cniConfDir != "" {
		nads = netattach.DirSource{Dir: f.cniConfDir}
	}
	if opts.Networks, err = podNetworks(f, nads, opts.Log); err != nil {
		return err
	}
	if err := vmDisks(&opts, disks); err != nil {
		return err
	}
	src := agent.NewStaticSource(vmis...)
	go printReports(cmd.OutOrStdout(), src.Stored(), opts.Log)
	return agent.New(conn, opts).Run(cmd.Context(), src, f.resync)
}

// runVMFromAPI registers the node, then runs the agent on the VMIs of the
// API server of f.kubeconfig (or the in-cluster config) until ctx ends.
func runVMFromAPI(ctx context.Context, f *vmFlags, cfg *rest.Config, reserved resource.Quantity, conn *libvirt.Conn, opts agent.Options, kvm kvmprobe.Result, disks *vmdisks.Options, pools []hostpath.Pool) error {
	err := runAgentFromAPI(ctx, f, cfg, reserved, conn, opts, kvm, disks, pools)
	if ctx.Err() != nil {
		// Told to stop (SIGTERM from the kubelet deleting the pod) while
		// registering the Node, starting the caches or running: whatever
		// the API calls, the console server or libvirt, cut short,
		// returned is not a failure of this agent; exit 0.
		return nil
	}
	return err
}

// runAgentFromAPI is runVMFromAPI before its stop rule: the Node
// registration, the API caches, the console server and the agent.
func runAgentFromAPI(ctx context.Context, f *vmFlags, cfg *rest.Config, reserved resource.Quantity, conn *libvirt.Conn, opts agent.Options, kvm kvmprobe.Result, disks *vmdisks.Options, pools []hostpath.Pool) error {
	// controller-runtime's and client-go's own log lines (cache, reflector)
	// go to the agent's logger.
	ctrllog.SetLogger(opts.Log.WithName("runtime"))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := cdiv1.AddToScheme(scheme); err != nil {
		return err
	}
	aopts := agent.DefaultAPIOptions(f.nodeName)
	aopts.Log = opts.Log.WithName("api")
	src, err := agent.NewAPISource(cfg, scheme, aopts)
	if err != nil {
		return err
	}
	nopts := agent.DefaultNodeOptions(f.nodeName)
	nopts.ReservedMemory, nopts.Interval = reserved, f.heartbeat
	nopts.Conditions = []corev1.NodeCondition{kvm.Condition(time.Now())}
	if err := agent.RegisterNode(ctx, src.Client(), nopts); err != nil {
		return err
	}
	opts.Log.Info("node registered", "node", f.nodeName, "api", cfg.Host)
	go agent.KeepNodeRegistered(ctx, src.Client(), nopts, func(err error) { opts.Log.Error(err, "node heartbeat") })
	if err := src.Start(ctx); err != nil {
		return fmt.Errorf("API server %s: %w", cfg.Host, err)
	}
	if opts.Networks, err = podNetworks(f, netattach.APISource{Client: src.Client()}, opts.Log); err != nil {
		return err
	}
	vopts := importcontroller.DefaultOptions()
	vopts.NodeName, vopts.DriverName, vopts.Pools = f.nodeName, f.csiDriver, pools
	opts.Domain.ResolvePVC = vmdisks.PVCResolver{Client: src.Client(), Volumes: vopts, Timeout: 10 * time.Second}.Resolve
	if disks != nil {
		objs := vmdisks.APIObjects{Client: src.Client()}
		disks.Secrets, disks.ConfigMaps = objs.Secret, objs.ConfigMap
	}
	if err := vmDisks(&opts, disks); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consoleErr := make(chan error, 1)
	if f.consoleBind != "" {
		copts := console.DefaultOptions(f.nodeName)
		copts.BindAddress, copts.AdvertiseAddress, copts.Log = f.consoleBind, f.consoleAdv, opts.Log.WithName("console")
		opener := console.OpenerFunc(func(_ context.Context, name string) (io.ReadCloser, error) { return conn.OpenConsole(name) })
		go func() {
			if err := console.Run(ctx, src.Client(), opener, copts); err != nil {
				consoleErr <- err
				cancel()
			}
		}()
	}
	err = agent.New(conn, opts).Run(ctx, src, f.resync)
	select {
	case cerr := <-consoleErr:
		return cerr
	default:
		return err
	}
}

// decideDomainType gives --domain-type when set, else the KVM probe's
// decision (package kvmprobe) with --emulator and --kvm-probe-timeout.
func decideDomainType(ctx context.Context, f *vmFlags) kvmprobe.Result {
	if f.domainType != "" {
		return kvmprobe.Chosen(f.domainType)
	}
	o := kvmprobe.DefaultOptions()
	if f.emulator != "" {
		o.Guest.QEMU = f.emulator
	}
	o.Guest.Timeout = f.probeTime
	return kvmprobe.Probe(ctx, o)
}

// connectLibvirt connects to uri, retrying every second for up to wait
// (libvirtd may still be starting in the pod's other container), logging
// a failure every 10 s.
func connectLibvirt(ctx context.Context, uri string, wait time.Duration, log logr.Logger) (*libvirt.Conn, error) {
	deadline := time.Now().Add(wait)
	var lastLog time.Time
	for {
		conn, err := libvirt.Connect(uri)
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w (retried for %s: --libvirt-connect-timeout)", err, wait)
		}
		if time.Since(lastLog) >= 10*time.Second {
			log.Info("waiting for libvirtd", "uri", uri, "error", err.Error())
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("libvirt %s: %w", uri, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// vmNetworks gives the agent's CNI network setup: NetworkAttachmentDefinitions
// from src, the plugins of --cni-bin-dir, libcni's cache in --cni-cache-dir
// (default <state-dir>/cni), run in --cni-host-netns.
func vmNetworks(f *vmFlags, src netattach.ConfigSource) (agent.NetworkSetup, error) {
	o := netattach.DefaultOptions()
	o.BinDirs, o.HostNetns = []string{f.cniBinDir}, f.cniHostNS
	o.CacheDir = f.cniCacheDir
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(f.stateDir, "cni")
	}
	att, err := netattach.NewAttacher(o)
	if err != nil {
		return nil, fmt.Errorf("--cni-bin-dir/--cni-cache-dir: %w", err)
	}
	return &netattach.VMINetworks{Source: src, Attacher: att}, nil
}

// vmDisks sets the agent's disk preparation (vmdisks with o; none when o
// is nil) and the domain's resolver of the volumes it prepares.
func vmDisks(opts *agent.Options, o *vmdisks.Options) error {
	if o == nil {
		return nil
	}
	d, err := vmdisks.New(*o)
	if err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	opts.Disks, opts.Domain.ResolveVolume = d, d.Resolve
	return nil
}

// bridgeResolver maps the pod network to podBridge and multus networks
// (by networkName, with or without namespace) to byName.
func bridgeResolver(podBridge string, byName map[string]string) func(string, kubevirtv1.Network) (string, error) {
	return func(namespace string, n kubevirtv1.Network) (string, error) {
		switch {
		case n.Pod != nil && podBridge != "":
			return podBridge, nil
		case n.Pod != nil:
			return "", errors.New("this node has no pod bridge (--pod-bridge)")
		case n.Multus != nil:
			if b, ok := byName[n.Multus.NetworkName]; ok {
				return b, nil
			}
			if b, ok := byName[namespace+"/"+n.Multus.NetworkName]; ok {
				return b, nil
			}
			return "", fmt.Errorf("network %q has no bridge on this node (--network-bridge)", n.Multus.NetworkName)
		}
		return "", errors.New("no network source")
	}
}

// printReports prints a line per VMI whenever its phase or readiness
// changes: "<namespace>/<name> <phase> ready=<status> [reason]", and
// "<namespace>/<name> removed".
func printReports(w io.Writer, reports <-chan agent.Report, log logr.Logger) {
	last := map[string]string{}
	for r := range reports {
		id := r.Namespace + "/" + r.Name
		line := id + " removed"
		if !r.Removed {
			ready, reason := "Unknown", ""
			for _, c := range r.Status.Conditions {
				if c.Type == kubevirtv1.VirtualMachineInstanceReady {
					ready, reason = string(c.Status), c.Reason
				}
			}
			line = strings.TrimSpace(fmt.Sprintf("%s %s ready=%s %s", id, r.Status.Phase, ready, reason))
		}
		if last[id] == line {
			continue
		}
		last[id] = line
		if _, err := fmt.Fprintln(w, line); err != nil {
			log.Error(err, "printing status")
		}
	}
}

// readVMIFile decodes every YAML document of path as a VMI, strictly: an
// unknown field is an error naming the file and document.
func readVMIFile(path string) ([]*kubevirtv1.VirtualMachineInstance, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--vmi-file: %w", err)
	}
	var out []*kubevirtv1.VirtualMachineInstance
	for i, doc := range bytes.Split(raw, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		vmi, err := domain.DecodeVMI(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		if vmi.Kind != "VirtualMachineInstance" {
			return nil, fmt.Errorf("%s: document %d: kind %q, expected VirtualMachineInstance", path, i+1, vmi.Kind)
		}
		if vmi.Namespace == "" {
			vmi.Namespace = "default"
		}
		if vmi.UID == "" {
			// the API server would set one; a file gets a stable one
			vmi.UID = types.UID(uuid.NewSHA1(uuid.NameSpaceURL, []byte("vmi:"+vmi.Namespace+"/"+vmi.Name)).String())
		}
		out = append(out, vmi)
	}
	return out, nil
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			b.Write(l)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
