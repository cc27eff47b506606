package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"github.com/converge-dev/converge/nodeplane/network/dhcp"
	"github.com/converge-dev/converge/nodeplane/network/netattach"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
)

// podNetworkFlags are converge-node vm's flags of the pod network: the
// node's CNI configuration, which the agent runs for VMIs as the
// kubelet's container runtime runs it for pods.
type podNetworkFlags struct {
	confDir, binDir, name, resolvConf string
}

func (p *podNetworkFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&p.confDir, "pod-network-conf-dir", "", "the container runtime's CNI configuration directory (its default: "+netattach.DefaultPodNetwork().ConfDir+", which the agent's DaemonSet passes): its first configuration (or --pod-network-name) is the pod network VMIs are attached to, as pods are; empty, or a directory that does not exist at start: this node has no pod network (VMIs without interfaces get no NIC, masquerade is refused)")
	fl.StringVar(&p.binDir, "pod-network-bin-dir", netattach.DefaultOptions().BinDirs[0], "the container runtime's CNI plugin directory, where the pod network's plugins are (in the agent's DaemonSet: the host's, mounted elsewhere than the image's own /opt/cni/bin)")
	fl.StringVar(&p.name, "pod-network-name", "", "the pod network's name in --pod-network-conf-dir (default: the first configuration in lexical order, the runtime's choice; set it when that is Multus')")
	fl.StringVar(&p.resolvConf, "pod-network-resolv-conf", "/etc/resolv.conf", "the resolv.conf whose name servers and search domains the agent's DHCP servers offer guests (KubeVirt offers the pod's)")
}

// setup gives the pod network's setup, or nil when this node has none
// (--pod-network-conf-dir empty or missing). cacheDir is the agent's CNI
// cache; the pod network's results go to its pod/ directory, since its
// plugins come from another directory.
func (p *podNetworkFlags) setup(cacheDir, podBridge, hostNetns string, log logr.Logger) (*netattach.PodNetworkSetup, error) {
	if p.confDir == "" {
		log.Info("no pod network: --pod-network-conf-dir is empty")
		return nil, nil
	}
	if st, err := os.Stat(p.confDir); err != nil || !st.IsDir() {
		log.Info("no pod network: the CNI configuration directory does not exist", "dir", p.confDir)
		return nil, nil
	}
	if _, err := dhcp.ReadResolvConf(p.resolvConf); err != nil {
		return nil, fmt.Errorf("--pod-network-resolv-conf %s: %w", p.resolvConf, err)
	}
	o := netattach.DefaultOptions()
	o.BinDirs, o.CacheDir, o.HostNetns = []string{p.binDir}, filepath.Join(cacheDir, "pod"), hostNetns
	att, err := netattach.NewAttacher(o)
	if err != nil {
		return nil, fmt.Errorf("--pod-network-bin-dir: %w", err)
	}
	n := netattach.PodNetwork{ConfDir: p.confDir, Name: p.name}
	if list, file, err := n.Load(); err == nil {
		log.Info("pod network", "name", list.Name, "file", file, "plugins", p.binDir)
	} else if errors.Is(err, netattach.ErrNoPodNetwork) {
		log.Info("pod network: no configuration yet; VMIs on it wait for it", "dir", p.confDir)
	} else {
		log.Error(err, "pod network: VMIs on it wait until it is fixed")
	}
	return &netattach.PodNetworkSetup{Network: n, Attacher: att, BridgeBinding: podBridge == ""}, nil
}

// podNetworks gives the agent's network setup: the CNI bridge networks
// of src (nil: none, multus networks go to --network-bridge) as
// vmNetworks makes it, and the pod network; nil when there is neither.
func podNetworks(f *vmFlags, src netattach.ConfigSource, log logr.Logger) (agent.NetworkSetup, error) {
	cacheDir := f.cniCacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(f.stateDir, "cni")
	}
	pod, err := f.podNet.setup(cacheDir, f.podBridge, f.cniHostNS, log)
	if err != nil {
		return nil, err
	}
	if src == nil && pod == nil {
		return nil, nil
	}
	ns, err := vmNetworks(f, src)
	if err != nil {
		return nil, err
	}
	v := ns.(*netattach.VMINetworks)
	v.Pod, v.ResolvConf, v.Log = pod, f.podNet.resolvConf, log.WithName("network")
	return v, nil
}
