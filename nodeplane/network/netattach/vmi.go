package netattach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/network/dhcp"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// VMINetworks plumbs a VMI's NICs on the networks the agent attaches
// itself, without pods, as KubeVirt's virt-launcher does in its pod:
//
//   - the pod network (Pod): CNI ADD of the node's pod network
//     configuration into the VMI's network namespace (the stand-in for
//     virt-launcher's pod, NetnsName) as eth0, as the container runtime
//     does for a pod. A masquerade interface gets KubeVirt's masquerade
//     binding behind the pod IP (package masquerade) and its address by
//     DHCP; a bridge interface (Pod.BridgeBinding) gets the bridge
//     binding, the pod IP served to the guest by DHCP. A VMI declaring no
//     interfaces gets KubeVirt's default (domain.PodInterfaceDefault).
//   - multus networks (Source) with bridge: {}: CNI ADD of the
//     NetworkAttachmentDefinition's configuration as net1, net2, …
//     (multus' names, in spec.networks order) with the NIC's MAC, and the
//     bridge binding, the IPAM address served by DHCP.
//
// libvirt creates each VM tap (TapName) unattached; Plumb moves it into
// the namespace and binds it (Bind, masquerade.Plumb) and starts a DHCP
// server per NIC (package dhcp, one goroutine each, stopped by
// Teardown; Check starts them again after an agent restart). It
// implements the VM agent's NetworkSetup.
type VMINetworks struct {
	// Source gives the NetworkAttachmentDefinitions' configurations;
	// nil leaves multus networks to the domain's bridge resolver.
	Source ConfigSource
	// Attacher runs the NetworkAttachmentDefinitions' plugins; its
	// HostNetns is where taps are found.
	Attacher *Attacher
	// Pod is the node's pod network; nil: the node has none (VMIs without
	// interfaces get no NIC, masquerade is refused).
	Pod *PodNetworkSetup
	// ResolvConf is the resolv.conf whose name servers and search domains
	// the DHCP servers offer (the pod's, in KubeVirt); empty means
	// /etc/resolv.conf.
	ResolvConf string
	// Timeout bounds each call (the plugins and the source); 0 means 1 min.
	Timeout time.Duration
	// Log gets the DHCP servers' lines.
	Log logr.Logger

	mu      sync.Mutex
	servers map[types.UID]map[string]*dhcp.Server // by in-namespace bridge
}

// PodNetworkSetup is how the agent attaches VMIs to the pod network.
type PodNetworkSetup struct {
	// Network is where its configuration is.
	Network PodNetwork
	// Attacher runs its plugins: the container runtime's plugin
	// directory, and a result cache of its own (CNI DEL reads it).
	Attacher *Attacher
	// BridgeBinding: bridge-bound interfaces on the pod network are
	// attached through it too (KubeVirt's bridge binding on the pod
	// network); false leaves them to the domain's bridge resolver
	// (converge-node vm --pod-bridge).
	BridgeBinding bool
}

// PodIfName is the pod network's interface in the VMI's namespace, as
// in a pod.
const PodIfName = "eth0"

// NetnsName gives the name of a VMI's network namespace: "cvm-" and the
// first 8 characters of its UID.
func NetnsName(uid types.UID) string { return "cvm-" + short(uid) }

// TapName gives the tap of a VMI's n-th CNI interface (net<n>, 0 for the
// pod network's eth0): "cvt<first 8 characters of the UID>-<n>", at most
// 15 bytes for n < 1000.
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
	iface          kubevirtv1.Interface
	index          int // the interface's position (KubeVirt numbers the fake DHCP server addresses by it)
	mac            string
	ifName         string
	n              int
	pod            bool
	nadNS, nadName string
}

func (n vmiNet) masquerade() bool { return n.iface.Masquerade != nil }

// networks gives the VMI's interfaces handled here: masquerade or
// (Pod.BridgeBinding) bridge on the first pod network, when the node has
// a pod network, and bridge on a multus network, when Source is set.
func (v *VMINetworks) networks(vmi *kubevirtv1.VirtualMachineInstance) []vmiNet {
	ifaces, nets := vmi.Spec.Domain.Devices.Interfaces, vmi.Spec.Networks
	if v.Pod != nil {
		if di, dn, ok := domain.PodInterfaceDefault(&vmi.Spec); ok {
			ifaces, nets = di, dn
		}
	}
	index := map[string]int{}
	for i, iface := range ifaces {
		index[iface.Name] = i
	}
	var out []vmiNet
	n, pods := 0, 0
	for _, nw := range nets {
		if nw.Multus != nil {
			n++ // multus numbers every multus network
		}
		if nw.Pod != nil {
			pods++
		}
		i, ok := index[nw.Name]
		if !ok {
			continue
		}
		iface := ifaces[i]
		mac := domain.MAC(string(vmi.UID), iface.Name)
		if hw, err := net.ParseMAC(iface.MacAddress); err == nil {
			mac = hw.String()
		}
		vn := vmiNet{network: nw, iface: iface, index: i, mac: mac}
		switch {
		case nw.Pod != nil && pods == 1 && v.Pod != nil && (iface.Masquerade != nil || (iface.Bridge != nil && v.Pod.BridgeBinding)):
			vn.ifName, vn.pod = PodIfName, true
		case nw.Multus != nil && v.Source != nil && iface.Bridge != nil:
			ns, name, found := strings.Cut(nw.Multus.NetworkName, "/")
			if !found {
				ns, name = vmi.Namespace, nw.Multus.NetworkName
			}
			vn.ifName, vn.n, vn.nadNS, vn.nadName = "net"+strconv.Itoa(n), n, ns, name
		default:
			continue
		}
		out = append(out, vn)
	}
	return out
}

// attacher gives the Attacher of n's network.
func (v *VMINetworks) attacher(n vmiNet) *Attacher {
	if n.pod {
		return v.Pod.Attacher
	}
	return v.Attacher
}

func (v *VMINetworks) ctx() (context.Context, context.CancelFunc) {
	d := v.Timeout
	if d == 0 {
		d = time.Minute
	}
	return context.WithTimeout(context.Background(), d)
}

// Setup creates the VMI's namespace (loopback up, as a runtime does for
// a pod) and runs CNI ADD for each handled interface not attached yet
// (libcni's caches say which), and gives their taps by network name: the
// MTU of the NetworkAttachmentDefinition's configuration, or of the pod
// interface. A NetworkAttachmentDefinition that is missing or whose first
// plugin is not of type bridge, or a pod network without configuration,
// is an error naming it. A VMI without such interfaces gets no namespace
// and an empty map.
func (v *VMINetworks) Setup(vmi *kubevirtv1.VirtualMachineInstance) (map[string]domain.Tap, error) {
	nets := v.networks(vmi)
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
		if nw.pod {
			conf, _, err := v.Pod.Network.Load()
			if err != nil {
				return nil, fmt.Errorf("%s: network %q: %w", id, nw.network.Name, err)
			}
			confs[i] = conf
			taps[nw.network.Name] = domain.Tap{Name: TapName(vmi.UID, 0)}
			continue
		}
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
	if err := inNetns(path, loUp); err != nil {
		return nil, fmt.Errorf("%s: network namespace %s: loopback: %w", id, path, err)
	}
	for i, nw := range nets {
		att := v.attacher(nw)
		cached, err := att.Cached(string(vmi.UID))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		done := false
		for _, c := range cached {
			done = done || c.IfName == nw.ifName
		}
		if !done {
			ep := Endpoint{ContainerID: string(vmi.UID), Netns: path, IfName: nw.ifName, MAC: nw.mac, PodNamespace: vmi.Namespace, PodName: vmi.Name}
			if nw.masquerade() {
				ep.MAC = "" // the pod interface keeps its own MAC, the guest's is behind NAT
			}
			if _, err := att.Add(ctx, confs[i], ep); err != nil {
				return nil, fmt.Errorf("%s: network %q: %w", id, nw.network.Name, err)
			}
		}
		if nw.pod {
			mtu, err := linkMTU(path, nw.ifName)
			if err != nil {
				return nil, fmt.Errorf("%s: network %q: %w", id, nw.network.Name, err)
			}
			taps[nw.network.Name] = domain.Tap{Name: TapName(vmi.UID, 0), MTU: mtu}
		}
	}
	return taps, nil
}

// attachment is a handled interface with its cached CNI attachment.
type attachment struct {
	vmiNet
	att *libcni.NetworkAttachment
}

// attachments gives the VMI's handled interfaces that are attached (in
// libcni's caches).
func (v *VMINetworks) attachments(vmi *kubevirtv1.VirtualMachineInstance) ([]attachment, error) {
	var out []attachment
	for _, nw := range v.networks(vmi) {
		cached, err := v.attacher(nw).Cached(string(vmi.UID))
		if err != nil {
			return nil, err
		}
		for _, c := range cached {
			if c.IfName == nw.ifName {
				out = append(out, attachment{nw, c})
			}
		}
	}
	return out, nil
}

// binding gives the bridge binding of a bridge-bound attachment.
func (v *VMINetworks) binding(uid types.UID, a attachment) (Binding, error) {
	_, pc, err := ParseConfig(a.att.Network, a.att.Config)
	if err != nil {
		return Binding{}, err
	}
	return Binding{Netns: NetnsPath(NetnsName(uid)), HostNetns: v.Attacher.opts.HostNetns, PodIf: a.ifName, Tap: TapName(uid, a.n), Bridge: BridgeName(a.ifName), MTU: pc.MTU}, nil
}

// Plumb binds each attached interface of the running VMI to its tap and
// starts its DHCP server.
func (v *VMINetworks) Plumb(vmi *kubevirtv1.VirtualMachineInstance) error {
	id := fmt.Sprintf("VirtualMachineInstance %s/%s", vmi.Namespace, vmi.Name)
	atts, err := v.attachments(vmi)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	var errs []error
	for _, a := range atts {
		if a.masquerade() {
			err = v.plumbMasquerade(vmi, a)
		} else {
			var b Binding
			if b, err = v.binding(vmi.UID, a); err == nil {
				err = Bind(b)
			}
		}
		if err == nil {
			err = v.serveDHCP(vmi, a)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// Check verifies a running VMI's attachments after an agent restart and
// makes what is missing, DHCP servers included. A bound bridge interface
// is checked by Verify and, on a bridge plugin, by its host veth still
// being a port of the CNI bridge (the plugin's own CHECK would refuse it:
// the binding moved the IP away and changed the pod interface's MAC, as
// KubeVirt's does). A bridge interface not bound yet gets the plugin's
// CHECK through libcni, then Bind. A masquerade interface is checked by
// masquerade.Verify and plumbed again when something is missing.
func (v *VMINetworks) Check(vmi *kubevirtv1.VirtualMachineInstance) error {
	id := fmt.Sprintf("VirtualMachineInstance %s/%s", vmi.Namespace, vmi.Name)
	atts, err := v.attachments(vmi)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	ctx, cancel := v.ctx()
	defer cancel()
	var errs []error
	for _, a := range atts {
		var err error
		if a.masquerade() {
			err = v.checkMasquerade(vmi, a)
		} else {
			err = v.checkBridge(ctx, vmi, a)
		}
		if err == nil {
			err = v.serveDHCP(vmi, a)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (v *VMINetworks) checkBridge(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, a attachment) error {
	b, err := v.binding(vmi.UID, a)
	if err != nil {
		return err
	}
	if err := Verify(b); err == nil {
		return v.checkHostSide(a.att, v.attacher(a.vmiNet))
	} else if !errors.Is(err, ErrNotBound) {
		return err
	}
	if !v.podIfBound(b) {
		conf, err := libcni.NetworkConfFromBytes(a.att.Config)
		if err == nil {
			err = v.attacher(a.vmiNet).Check(ctx, conf, Endpoint{ContainerID: string(vmi.UID), Netns: b.Netns, IfName: b.PodIf, PodNamespace: vmi.Namespace, PodName: vmi.Name})
		}
		if err != nil {
			return err
		}
	}
	return Bind(b)
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

// checkHostSide checks, for a bridge plugin's attachment, that the host
// veth of its cached result is still a port of the bridge of the result.
func (v *VMINetworks) checkHostSide(att *libcni.NetworkAttachment, attacher *Attacher) error {
	_, pc, _ := ParseConfig(att.Network, att.Config)
	if pc.Type != "bridge" {
		return nil
	}
	res, err := attacher.CachedResult(att)
	if err != nil {
		return err
	}
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

// Teardown stops the VMI's DHCP servers, runs CNI DEL for every cached
// attachment of the VMI (with the configuration it was added with), then
// deletes its namespace, which takes whatever is left in it (the tap, the
// in-namespace bridge, the NAT rules). It is idempotent.
func (v *VMINetworks) Teardown(namespace, name string, uid types.UID) error {
	v.stopDHCP(uid)
	ctx, cancel := v.ctx()
	defer cancel()
	err := v.Attacher.Del(ctx, string(uid))
	if v.Pod != nil {
		err = errors.Join(err, v.Pod.Attacher.Del(ctx, string(uid)))
	}
	if err == nil {
		err = DeleteNetns(NetnsName(uid))
	}
	if err != nil {
		return fmt.Errorf("VirtualMachineInstance %s/%s: %w", namespace, name, err)
	}
	return nil
}

// loUp sets the loopback interface up (in the caller's namespace).
func loUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

// linkMTU gives the MTU of ifName in the namespace at path.
func linkMTU(path, ifName string) (int, error) {
	mtu := 0
	err := inNetns(path, func() error {
		l, err := netlink.LinkByName(ifName)
		if err != nil {
			return fmt.Errorf("interface %s in %s: %w", ifName, path, err)
		}
		mtu = l.Attrs().MTU
		return nil
	})
	return mtu, err
}
