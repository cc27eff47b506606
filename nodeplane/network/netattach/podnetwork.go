package netattach

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// PodNetwork is where the node's pod network is configured: the CNI
// configuration directory the container runtime reads for pods (the
// kubelet's runtime: containerd's or CRI-O's conf_dir), so that a VMI's
// namespace is attached to the pod network exactly as a pod's.
type PodNetwork struct {
	// ConfDir is the configuration directory (the runtime's default is
	// /etc/cni/net.d).
	ConfDir string
	// Name, when set, picks the configuration whose network name it is
	// (as Multus' clusterNetwork names it); empty takes the runtime's
	// choice, the first file in lexical order.
	Name string
}

// DefaultPodNetwork gives /etc/cni/net.d and the runtime's choice.
func DefaultPodNetwork() PodNetwork { return PodNetwork{ConfDir: "/etc/cni/net.d"} }

// ErrNoPodNetwork is wrapped by Load when the directory holds no
// configuration (yet: the cluster's network plugin writes it, and the
// kubelet reports the node NetworkNotReady until then).
var ErrNoPodNetwork = errors.New("no pod network configuration")

// Load reads the pod network's configuration as containerd's CRI plugin
// does (containerd/go-cni opts.go loadFromConfDir, the first of the
// sorted *.conf, *.conflist and *.json files is the default network; a
// .conf is one plugin made a list), or the one named Name. A file that
// does not parse is an error naming it, as for the runtime. It refuses a
// Multus configuration (type multus or multus-shim): Multus delegates to
// the cluster network by looking the pod up in the API, and a VMI has no
// pod; set Name to the cluster network Multus delegates to. It then
// checks the lease directories (CheckLeaseDirs). It gives the list and
// the file it came from.
func (p PodNetwork) Load() (*libcni.NetworkConfigList, string, error) {
	files, err := libcni.ConfFiles(p.ConfDir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return nil, "", fmt.Errorf("pod network: CNI configuration directory %s: %w", p.ConfDir, err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, "", fmt.Errorf("pod network: %w in %s (the cluster's network plugin writes it there; converge-node vm --pod-network-conf-dir)", ErrNoPodNetwork, p.ConfDir)
	}
	var names []string
	for _, f := range files {
		list, err := loadConfFile(f)
		if err != nil {
			return nil, "", fmt.Errorf("pod network: %w", err)
		}
		if p.Name != "" && list.Name != p.Name {
			names = append(names, list.Name)
			continue
		}
		var first struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(list.Plugins[0].Bytes, &first)
		if first.Type == "multus" || first.Type == "multus-shim" {
			return nil, "", fmt.Errorf("pod network: %s is Multus' configuration (type %s), which looks the pod up in the API, and a VMI has no pod: name the cluster network Multus delegates to (converge-node vm --pod-network-name)", f, first.Type)
		}
		if err := CheckLeaseDirs(list); err != nil {
			return nil, "", fmt.Errorf("pod network %s (%s): %w", list.Name, f, err)
		}
		return list, f, nil
	}
	return nil, "", fmt.Errorf("pod network: %w named %q in %s (found %s)", ErrNoPodNetwork, p.Name, p.ConfDir, strings.Join(names, ", "))
}

func loadConfFile(f string) (*libcni.NetworkConfigList, error) {
	if strings.HasSuffix(f, ".conflist") {
		list, err := libcni.ConfListFromFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if len(list.Plugins) == 0 {
			return nil, fmt.Errorf("%s: no plugins", f)
		}
		return list, nil
	}
	conf, err := libcni.ConfFromFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	if conf.Network.Type == "" {
		return nil, fmt.Errorf("%s: no plugin type", f)
	}
	list, err := libcni.ConfListFromConf(conf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return list, nil
}

// HostLocalDefaultDataDir is where host-local keeps its leases when the
// configuration names no dataDir.
const HostLocalDefaultDataDir = "/var/lib/cni/networks"

// CheckLeaseDirs checks, for each plugin of list whose IPAM is
// host-local, that the parent of its lease directory (dataDir, default
// HostLocalDefaultDataDir) exists here. The agent must share the
// runtime's leases: host-local hands out the addresses it finds no lease
// file for, so a lease directory of the agent's own (an unmounted path in
// its container) would hand VMIs the pod IPs the runtime also hands out.
// In the agent's DaemonSet the host's directory is mounted at the same
// path.
func CheckLeaseDirs(list *libcni.NetworkConfigList) error {
	for i, p := range list.Plugins {
		var conf struct {
			IPAM struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		}
		if err := json.Unmarshal(p.Bytes, &conf); err != nil {
			return fmt.Errorf("plugins[%d]: %w", i, err)
		}
		if conf.IPAM.Type != "host-local" {
			continue
		}
		dir := conf.IPAM.DataDir
		if dir == "" {
			dir = HostLocalDefaultDataDir
		}
		parent := filepath.Dir(dir)
		if st, err := os.Stat(parent); err != nil || !st.IsDir() {
			return fmt.Errorf("plugins[%d]: host-local's lease directory %s: %s is missing here: the agent must see the container runtime's leases at the same path (mount the host's %s there), or its VMIs would get pod IPs the runtime also hands out", i, dir, parent, parent)
		}
	}
	return nil
}
