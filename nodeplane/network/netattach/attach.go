package netattach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// Options configure an Attacher. Start from DefaultOptions.
type Options struct {
	// BinDirs are searched for the CNI plugin binaries, in order.
	BinDirs []string
	// CacheDir is libcni's cache of results and configurations per
	// attachment (<CacheDir>/results): DEL reads it, so it must survive an
	// agent restart (converge-node puts it under --state-dir).
	CacheDir string
	// HostNetns is the path of the network namespace the plugins run in,
	// where the bridges and the host ends of the veths live and where
	// libvirt creates the VMs' taps. Empty means the caller's own.
	HostNetns string
	// Exec runs the plugins; nil execs the binaries (libcni's default).
	Exec invoke.Exec
}

// DefaultOptions gives the plugins of /opt/cni/bin (where
// `converge-node cni-install` puts them), the cache
// /var/lib/converge/vm/cni and the caller's network namespace.
func DefaultOptions() Options {
	return Options{BinDirs: []string{"/opt/cni/bin"}, CacheDir: "/var/lib/converge/vm/cni"}
}

// Attacher runs CNI ADD, CHECK and DEL through libcni.
type Attacher struct {
	opts Options
	cni  *libcni.CNIConfig
}

// NewAttacher gives an Attacher with opts; CacheDir is required, because
// DEL after a crash depends on it.
func NewAttacher(opts Options) (*Attacher, error) {
	if opts.CacheDir == "" {
		return nil, errors.New("netattach: Options.CacheDir: required (DEL reads the cached attachments)")
	}
	if len(opts.BinDirs) == 0 {
		return nil, errors.New("netattach: Options.BinDirs: at least one CNI plugin directory is required")
	}
	return &Attacher{opts: opts, cni: libcni.NewCNIConfigWithCacheDir(opts.BinDirs, opts.CacheDir, opts.Exec)}, nil
}

// Endpoint is one interface of one sandbox (a VMI) on one network.
type Endpoint struct {
	// ContainerID identifies the sandbox: the VMI's UID.
	ContainerID string
	// Netns is the path of the sandbox's network namespace.
	Netns string
	// IfName is the interface's name inside Netns (net1, net2, … as multus
	// names secondary networks).
	IfName string
	// MAC is given to the plugin as runtime config "mac" (when the
	// configuration declares the capability) and as CNI_ARGS MAC; empty
	// lets the plugin choose.
	MAC string
	// PodNamespace and PodName go into CNI_ARGS as K8S_POD_NAMESPACE and
	// K8S_POD_NAME, as multus passes them.
	PodNamespace, PodName string
}

func (a *Attacher) runtimeConf(ep Endpoint) *libcni.RuntimeConf {
	args := [][2]string{
		{"IgnoreUnknown", "true"},
		{"K8S_POD_NAMESPACE", ep.PodNamespace},
		{"K8S_POD_NAME", ep.PodName},
		{"K8S_POD_INFRA_CONTAINER_ID", ep.ContainerID},
		{"K8S_POD_UID", ep.ContainerID},
	}
	rt := &libcni.RuntimeConf{ContainerID: ep.ContainerID, NetNS: ep.Netns, IfName: ep.IfName}
	if ep.MAC != "" {
		args = append(args, [2]string{"MAC", ep.MAC})
		rt.CapabilityArgs = map[string]any{"mac": ep.MAC}
	}
	rt.Args = args
	return rt
}

// Add runs CNI ADD of conf for ep in the host namespace and gives the
// plugin's result (converted to CNI 1.0). libcni caches the result and
// the configuration for Check and Del.
func (a *Attacher) Add(ctx context.Context, conf *libcni.NetworkConfigList, ep Endpoint) (*types100.Result, error) {
	var res *types100.Result
	err := inNetns(a.opts.HostNetns, func() error {
		r, err := a.cni.AddNetworkList(ctx, conf, a.runtimeConf(ep))
		if err != nil {
			return err
		}
		res, err = types100.NewResultFromResult(r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("CNI ADD of network %s for %s (%s in %s): %w", conf.Name, ep.ContainerID, ep.IfName, ep.Netns, err)
	}
	return res, nil
}

// Check runs CNI CHECK of conf for ep with the cached result as
// prevResult.
func (a *Attacher) Check(ctx context.Context, conf *libcni.NetworkConfigList, ep Endpoint) error {
	err := inNetns(a.opts.HostNetns, func() error { return a.cni.CheckNetworkList(ctx, conf, a.runtimeConf(ep)) })
	if err != nil {
		return fmt.Errorf("CNI CHECK of network %s for %s (%s in %s): %w", conf.Name, ep.ContainerID, ep.IfName, ep.Netns, err)
	}
	return nil
}

// Cached gives the attachments of containerID that libcni's cache holds
// (added and not deleted), with the configuration each was added with.
func (a *Attacher) Cached(containerID string) ([]*libcni.NetworkAttachment, error) {
	atts, err := a.cni.GetCachedAttachments(containerID)
	if err != nil {
		return nil, fmt.Errorf("CNI cache %s: attachments of %s: %w", a.opts.CacheDir, containerID, err)
	}
	return atts, nil
}

// CachedResult gives the cached result of one attachment.
func (a *Attacher) CachedResult(att *libcni.NetworkAttachment) (*types100.Result, error) {
	conf, err := libcni.NetworkConfFromBytes(att.Config)
	if err != nil {
		return nil, fmt.Errorf("CNI cache %s: network %s of %s: %w", a.opts.CacheDir, att.Network, att.ContainerID, err)
	}
	r, err := a.cni.GetNetworkListCachedResult(conf, &libcni.RuntimeConf{ContainerID: att.ContainerID, IfName: att.IfName})
	if err != nil || r == nil {
		return nil, fmt.Errorf("CNI cache %s: network %s of %s (%s): no cached result (%v)", a.opts.CacheDir, att.Network, att.ContainerID, att.IfName, err)
	}
	return types100.NewResultFromResult(r)
}

// Del runs CNI DEL for every cached attachment of containerID, with the
// configuration and arguments it was added with (so it works after a
// crash and after the NetworkAttachmentDefinition is gone). A netns that
// no longer exists is passed as empty, which makes the plugins release
// the IPAM reservation only. Del is idempotent: without cached
// attachments it does nothing. It gives the errors of all attachments.
func (a *Attacher) Del(ctx context.Context, containerID string) error {
	atts, err := a.Cached(containerID)
	if err != nil {
		return err
	}
	var errs []error
	for _, att := range atts {
		conf, err := libcni.NetworkConfFromBytes(att.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("CNI DEL of network %s for %s: cached configuration: %w", att.Network, containerID, err))
			continue
		}
		rt := &libcni.RuntimeConf{ContainerID: containerID, NetNS: att.NetNS, IfName: att.IfName, Args: att.CniArgs, CapabilityArgs: att.CapabilityArgs}
		if _, err := os.Stat(rt.NetNS); rt.NetNS != "" && err != nil {
			rt.NetNS = ""
		}
		if err := inNetns(a.opts.HostNetns, func() error { return a.cni.DelNetworkList(ctx, conf, rt) }); err != nil {
			errs = append(errs, fmt.Errorf("CNI DEL of network %s for %s (%s): %w", att.Network, containerID, att.IfName, err))
		}
	}
	return errors.Join(errs...)
}

// PluginConf is what converge reads of a network's first plugin.
type PluginConf struct {
	Type string `json:"type"`
	// MTU is the bridge plugin's mtu (0: the kernel's default, 1500).
	MTU int `json:"mtu"`
	// Bridge is the bridge plugin's bridge name (the plugin defaults to
	// cni0).
	Bridge string `json:"bridge"`
}

// ParseConfig parses a NetworkAttachmentDefinition's spec.config, one
// plugin configuration or a list, as multus does: a configuration without
// a name gets name. It gives the list and its first plugin's fields.
func ParseConfig(name string, raw []byte) (*libcni.NetworkConfigList, PluginConf, error) {
	var top map[string]any
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, PluginConf{}, fmt.Errorf("CNI configuration of %s: %w", name, err)
	}
	if n, _ := top["name"].(string); n == "" {
		top["name"] = name
		raw, _ = json.Marshal(top)
	}
	var list *libcni.NetworkConfigList
	var err error
	if _, ok := top["plugins"]; ok {
		list, err = libcni.NetworkConfFromBytes(raw)
	} else {
		var one *libcni.PluginConfig
		if one, err = libcni.ConfFromBytes(raw); err == nil {
			list, err = libcni.ConfListFromConf(one)
		}
	}
	if err != nil {
		return nil, PluginConf{}, fmt.Errorf("CNI configuration of %s: %w", name, err)
	}
	if len(list.Plugins) == 0 {
		return nil, PluginConf{}, fmt.Errorf("CNI configuration of %s: no plugins", name)
	}
	var pc PluginConf
	if err := json.Unmarshal(list.Plugins[0].Bytes, &pc); err != nil {
		return nil, PluginConf{}, fmt.Errorf("CNI configuration of %s: plugins[0]: %w", name, err)
	}
	return list, pc, nil
}
