package netattach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// VMINetworks plumbs a VMI's NICs on CNI bridge networks, KubeVirt's
// bridge binding without pods: the VMI gets a network namespace (the
// stand-in for virt-launcher's pod, NetnsName), each interface with
// bridge: {} on a multus network gets CNI ADD of its
// NetworkAttachmentDefinition's configuration into that namespace as
// net1, net2, … (multus' names, in spec.networks order) with the NIC's
// MAC, libvirt creates the VM's tap (TapName) unattached, and Plumb moves
// the tap into the namespace and bridges it with the CNI interface
// (Bind). It implements the VM agent's NetworkSetup.
type VMINetworks struct {
	// Source gives the NetworkAttachmentDefinitions' configurations.
	Source ConfigSource
	// Attacher runs the plugins; its HostNetns is where taps are found.
	Attacher *Attacher
	// Timeout bounds each call (the plugins and the source); 0 means 1 min.
	Timeout time.Duration
}

// NetnsName gives the name of a VMI's network namespace: "cvm-" and the
// first 8 characters of its UID.
func NetnsName(uid types.UID) string { return "cvm-" + short(uid) }

// TapName gives the tap of a VMI's n-th CNI interface (net<n>):
// "cvt<first 8 characters of the UID>-<n>", at most 15 bytes for n < 1000.
func TapName(uid types.UID, n int) string { return fmt.Sprintf("cvt%s-%d", short(uid), n) }

func short(uid types.UID) string {
	s := strings.ReplaceAll(string(uid), "-", "")
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}

type vmiNet struct {
	network        kubevirtv1.Network
	mac            string
	ifName         string
	n              int
	nadNS, nadName string
}

// networks gives the VMI's interfaces handled here: bridge binding on a
// multus network.
func networks(vmi *kubevirtv1.VirtualMachineInstance) []vmiNet {
	ifaces := map[string]kubevirtv1.Interface{}
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		ifaces[i.Name] = i
	}
	var out []vmiNet
	n := 0
	for _, nw := range vmi.Spec.Networks {
		if nw.Multus == nil {
			continue
		}
		n++ // multus numbers every multus network
		iface, ok := ifaces[nw.Name]
		if !ok || iface.Bridge == nil {
			continue
		}
		mac := domain.MAC(string(vmi.UID), iface.Name)
		if hw, err := net.ParseMAC(iface.MacAddress); err == nil {
			mac = hw.String()
		}
		ns, name, found := strings.Cut(nw.Multus.NetworkName, "/")
		if !found {
			ns, name = vmi.Namespace, nw.Multus.NetworkName
		}
		out = append(out, vmiNet{network: nw, mac: mac, ifName: "net" + strconv.Itoa(n), n: n, nadNS: ns, nadName: name})
	}
	return out
}

func (v *VMINetworks) ctx() (context.Context, context.CancelFunc) {
	d := v.Timeout
	if d == 0 {
		d = time.Minute
	}
	return context.WithTimeout(context.Background(), d)
}

// Setup creates the VMI's namespace and runs CNI ADD for each handled
// interface not attached yet (libcni's cache says which), and gives their
// taps by network name, with the MTU of the network's configuration. A
// NetworkAttachmentDefinition that is missing or whose first plugin is not
// of type bridge is an error naming it. A VMI without such interfaces gets
// no namespace and an empty map.
func (v *VMINetworks) Setup(vmi *kubevirtv1.VirtualMachineInstance) (map[string]domain.Tap, error) {
	nets := networks(vmi)
	if len(nets) == 0 {
		return nil, nil
	}
	id := fmt.Sprintf("VirtualMachineInstance %s/%s", vmi.Namespace, vmi.Name)
	ctx, cancel := v.ctx()
	defer cancel()
	// every configuration first: a refused network creates nothing
	confs := make([]*libcni.NetworkConfigList, len(nets))
	taps := map[string]domain.Tap{}
	for i, nw := range nets {
		nad := nw.nadNS + "/" + nw.nadName
		raw, err := v.Source.Config(ctx, nw.nadNS, nw.nadName)
		if err != nil {
			return nil, fmt.Errorf("%s: network %q: %w", id, nw.network.Name, err)
		}
		conf, pc, err := ParseConfig(nw.nadName, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: network %q: NetworkAttachmentDefinition %s: %w", id, nw.network.Name, nad, err)
		}
		if pc.Type != "bridge" {
			return nil, fmt.Errorf("%s: network %q: NetworkAttachmentDefinition %s: CNI type %q: expected bridge (the only type the bridge binding supports)", id, nw.network.Name, nad, pc.Type)
		}
		confs[i] = conf
		taps[nw.network.Name] = domain.Tap{Name: TapName(vmi.UID, nw.n), MTU: pc.MTU}
	}
	path, err := EnsureNetns(NetnsName(vmi.UID))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	cached, err := v.Attacher.Cached(string(vmi.UID))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	done := map[string]bool{}
	for _, c := range cached {
		done[c.IfName] = true
	}
	for i, nw := range nets {
		if done[nw.ifName] {
			continue
		}
		ep := Endpoint{ContainerID: string(vmi.UID), Netns: path, IfName: nw.ifName, MAC: nw.mac, PodNamespace: vmi.Namespace, PodName: vmi.Name}
		if _, err := v.Attacher.Add(ctx, confs[i], ep); err != nil {
			return nil, fmt.Errorf("%s: network %q: %w", id, nw.network.Name, err)
		}
	}
	return taps, nil
}

// bindings gives the Binding of each cached attachment of the VMI.
func (v *VMINetworks) bindings(uid types.UID) ([]Binding, []*libcni.NetworkAttachment, error) {
	atts, err := v.Attacher.Cached(string(uid))
	if err != nil {
		return nil, nil, err
	}
	var out []Binding
	for _, att := range atts {
		n, err := strconv.Atoi(strings.TrimPrefix(att.IfName, "net"))
		if err != nil {
			return nil, nil, fmt.Errorf("CNI attachment %s of %s: interface %q: expected net<n>", att.Network, uid, att.IfName)
		}
		_, pc, err := ParseConfig(att.Network, att.Config)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, Binding{Netns: NetnsPath(NetnsName(uid)), HostNetns: v.Attacher.opts.HostNetns, PodIf: att.IfName, Tap: TapName(uid, n), Bridge: BridgeName(att.IfName), MTU: pc.MTU})
	}
	return out, atts, nil
}

// Plumb binds each attached interface of the running VMI to its tap.
func (v *VMINetworks) Plumb(vmi *kubevirtv1.VirtualMachineInstance) error {
	bs, _, err := v.bindings(vmi.UID)
	if err != nil {
		return fmt.Errorf("VirtualMachineInstance %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	var errs []error
	for _, b := range bs {
		if err := Bind(b); err != nil {
			errs = append(errs, fmt.Errorf("VirtualMachineInstance %s/%s: %w", vmi.Namespace, vmi.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Check verifies a running VMI's attachments after an agent restart. A
// bound interface is checked by Verify and by its host veth still being a
// port of the CNI bridge (the plugin's own CHECK would refuse it: the
// binding moved the IP away and changed the pod interface's MAC, as
// KubeVirt's does). An interface not bound yet gets the plugin's CHECK
// through libcni, then Bind.
func (v *VMINetworks) Check(vmi *kubevirtv1.VirtualMachineInstance) error {
	id := fmt.Sprintf("VirtualMachineInstance %s/%s", vmi.Namespace, vmi.Name)
	bs, atts, err := v.bindings(vmi.UID)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	ctx, cancel := v.ctx()
	defer cancel()
	var errs []error
	for i, b := range bs {
		if err := Verify(b); err == nil {
			if err := v.checkHostSide(atts[i]); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
			}
			continue
		} else if !errors.Is(err, ErrNotBound) {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		if !v.podIfBound(b) {
			conf, err := libcni.NetworkConfFromBytes(atts[i].Config)
			if err == nil {
				err = v.Attacher.Check(ctx, conf, Endpoint{ContainerID: string(vmi.UID), Netns: b.Netns, IfName: b.PodIf, PodNamespace: vmi.Namespace, PodName: vmi.Name})
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
				continue
			}
		}
		if err := Bind(b); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// podIfBound reports whether the pod interface is a port of some bridge
// already (Bind started on it).
func (v *VMINetworks) podIfBound(b Binding) bool {
	bound := false
	_ = inNetns(b.Netns, func() error {
		if l, err := netlink.LinkByName(b.PodIf); err == nil {
			bound = l.Attrs().MasterIndex != 0
		}
		return nil
	})
	return bound
}

// checkHostSide checks that the host veth of an attachment's cached
// result is still a port of the bridge of the result.
func (v *VMINetworks) checkHostSide(att *libcni.NetworkAttachment) error {
	res, err := v.Attacher.CachedResult(att)
	if err != nil {
		return err
	}
	_, pc, _ := ParseConfig(att.Network, att.Config)
	bridge := pc.Bridge
	if bridge == "" {
		bridge = "cni0"
	}
	return inNetns(v.Attacher.opts.HostNetns, func() error {
		br, err := netlink.LinkByName(bridge)
		if err != nil {
			return fmt.Errorf("CNI network %s: bridge %s: %w", att.Network, bridge, err)
		}
		for _, i := range res.Interfaces {
			if i.Sandbox != "" || i.Name == bridge {
				continue
			}
			l, err := netlink.LinkByName(i.Name)
			if err != nil {
				return fmt.Errorf("CNI network %s: host veth %s of %s: %w", att.Network, i.Name, att.IfName, err)
			}
			if l.Attrs().MasterIndex != br.Attrs().Index {
				return fmt.Errorf("CNI network %s: host veth %s of %s is not a port of %s", att.Network, i.Name, att.IfName, bridge)
			}
		}
		return nil
	})
}

// Teardown runs CNI DEL for every cached attachment of the VMI (with the
// configuration it was added with), then deletes its namespace, which
// takes whatever is left in it (the tap, the in-namespace bridge). It is
// idempotent.
func (v *VMINetworks) Teardown(namespace, name string, uid types.UID) error {
	ctx, cancel := v.ctx()
	defer cancel()
	err := v.Attacher.Del(ctx, string(uid))
	if err == nil {
		err = DeleteNetns(NetnsName(uid))
	}
	if err != nil {
		return fmt.Errorf("VirtualMachineInstance %s/%s: %w", namespace, name, err)
	}
	return nil
}
