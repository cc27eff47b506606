package netattach

import (
	"fmt"
	"net"
	"net/netip"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/network/dhcp"
	"github.com/converge-dev/converge/nodeplane/network/masquerade"
)

// serveDHCP starts the DHCP server of an attachment unless it runs: on
// the in-namespace bridge, for the NIC's MAC. A bridge attachment whose
// CNI result has no IPv4 address gets none (KubeVirt's IPAMDisabled),
// and its dhcpOptions are then an error.
func (v *VMINetworks) serveDHCP(vmi *kubevirtv1.VirtualMachineInstance, a attachment) error {
	bridge := BridgeName(a.ifName)
	v.mu.Lock()
	s := v.servers[vmi.UID][bridge]
	v.mu.Unlock()
	if s != nil && s.Running() {
		return nil
	}
	lease, ok, err := v.lease(vmi, a)
	if err != nil {
		return err
	}
	path := NetnsPath(NetnsName(vmi.UID))
	if !ok {
		if a.iface.DHCPOptions != nil {
			return fmt.Errorf("interface %q: dhcpOptions: network %q gave the pod interface %s no IPv4 address, so there is nothing to serve by DHCP", a.iface.Name, a.network.Name, a.ifName)
		}
		return nil
	}
	if !a.masquerade() {
		// KubeVirt's bridge binding serves from a link-local address on
		// the in-namespace bridge (pkg/network/link GetFakeBridgeIP)
		err := inNetns(path, func() error {
			br, err := netlink.LinkByName(bridge)
			if err != nil {
				return err
			}
			return netlink.AddrReplace(br, &netlink.Addr{IPNet: &net.IPNet{IP: lease.ServerID.AsSlice(), Mask: net.CIDRMask(32, 32)}})
		})
		if err != nil {
			return fmt.Errorf("DHCP server address %s on %s in %s: %w", lease.ServerID, bridge, path, err)
		}
	}
	s, err = dhcp.Serve(path, bridge, lease, v.Log.WithValues("vmi", vmi.Namespace+"/"+vmi.Name))
	if err != nil {
		return err
	}
	v.mu.Lock()
	if v.servers == nil {
		v.servers = map[types.UID]map[string]*dhcp.Server{}
	}
	if v.servers[vmi.UID] == nil {
		v.servers[vmi.UID] = map[string]*dhcp.Server{}
	}
	v.servers[vmi.UID][bridge] = s
	v.mu.Unlock()
	v.Log.Info("DHCP server started", "vmi", vmi.Namespace+"/"+vmi.Name, "interface", a.iface.Name, "mac", a.mac, "address", lease.Address.String(), "bridge", bridge)
	return nil
}

// stopDHCP stops the VMI's DHCP servers.
func (v *VMINetworks) stopDHCP(uid types.UID) {
	v.mu.Lock()
	servers := v.servers[uid]
	delete(v.servers, uid)
	v.mu.Unlock()
	for _, s := range servers {
		_ = s.Close()
	}
}

// Close stops every DHCP server, as the agent's process ending does; the
// VMIs' namespaces and attachments stay (Check serves them again).
func (v *VMINetworks) Close() {
	v.mu.Lock()
	var uids []types.UID
	for uid := range v.servers {
		uids = append(uids, uid)
	}
	v.mu.Unlock()
	for _, uid := range uids {
		v.stopDHCP(uid)
	}
}

// DHCPServers gives the leases the VMI's running DHCP servers offer, by
// in-namespace bridge.
func (v *VMINetworks) DHCPServers(uid types.UID) map[string]dhcp.Lease {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]dhcp.Lease{}
	for bridge, s := range v.servers[uid] {
		if s.Running() {
			out[bridge] = s.Lease()
		}
	}
	return out
}

// lease gives what an attachment's guest is offered (ok false: nothing,
// the network gave no IPv4 address):
//   - masquerade: the VM network's guest address, the gateway as router
//     and server (kubevirt pkg/network/dhcp/masquerade.go);
//   - bridge: the pod interface's IPv4 address from the CNI result, its
//     gateway as router, the result's other routes as classless routes,
//     served from 169.254.75.1<interface index> (pkg/network/dhcp/bridge.go,
//     pkg/network/setup/netpod/discoverbridge.go);
//
// and for both the MTU of the pod interface, the host name, DNS servers
// and search domains (ResolvConf with the VMI's dnsPolicy, dnsConfig and
// subdomain) and the interface's dhcpOptions.
func (v *VMINetworks) lease(vmi *kubevirtv1.VirtualMachineInstance, a attachment) (dhcp.Lease, bool, error) {
	path := NetnsPath(NetnsName(vmi.UID))
	mac, err := net.ParseMAC(a.mac)
	if err != nil {
		return dhcp.Lease{}, false, fmt.Errorf("interface %q: MAC %q: %w", a.iface.Name, a.mac, err)
	}
	l := dhcp.Lease{ClientMAC: mac, Hostname: dhcp.Hostname(vmi)}
	if a.masquerade() {
		cidr := ""
		if a.network.Pod != nil {
			cidr = a.network.Pod.VMNetworkCIDR
		}
		n, err := masquerade.NetworkOf(cidr)
		if err != nil {
			return dhcp.Lease{}, false, err
		}
		l.Address = netip.PrefixFrom(n.Guest, n.Gateway.Bits())
		l.ServerID, l.Router = n.Gateway.Addr(), n.Gateway.Addr()
	} else {
		res, err := v.attacher(a.vmiNet).CachedResult(a.att)
		if err != nil {
			return dhcp.Lease{}, false, err
		}
		ok := bridgeLease(&l, res)
		if !ok {
			return dhcp.Lease{}, false, nil
		}
		sid, err := netip.ParseAddr(fmt.Sprintf("169.254.75.1%d", a.index))
		if err != nil {
			return dhcp.Lease{}, false, fmt.Errorf("interface %q: the DHCP server address of interface #%d: KubeVirt's 169.254.75.1<index> scheme ends at 99", a.iface.Name, a.index)
		}
		l.ServerID = sid
	}
	mtu, err := linkMTU(path, a.ifName)
	if err != nil {
		return dhcp.Lease{}, false, err
	}
	if mtu > 0 && mtu < 1<<16 {
		l.MTU = uint16(mtu)
	}
	resolv := v.ResolvConf
	if resolv == "" {
		resolv = "/etc/resolv.conf"
	}
	dns, err := dhcp.ReadResolvConf(resolv)
	if err != nil {
		return dhcp.Lease{}, false, err
	}
	if dns, err = dns.WithVMI(&vmi.Spec); err != nil {
		return dhcp.Lease{}, false, err
	}
	l.DNS, l.Search, l.DomainName = dns.Servers, dns.Search, dns.DomainName()
	p := fmt.Sprintf("interface %q: dhcpOptions", a.iface.Name)
	if l, err = dhcp.WithInterfaceOptions(l, a.iface.DHCPOptions, p); err != nil {
		return dhcp.Lease{}, false, err
	}
	return l, true, nil
}

// bridgeLease fills l from a CNI result: the first IPv4 address of an
// interface in the sandbox, its gateway (or the default route's) as
// router, and the IPv4 routes other than the address's own subnet, a
// route without gateway going through the address's gateway (the CNI
// spec's default). A default route through the router is added to the
// classless routes when there are some, since a client given classless
// routes ignores the router option (RFC 3442). ok is false without an
// IPv4 address.
func bridgeLease(l *dhcp.Lease, res *types100.Result) bool {
	var ipc *types100.IPConfig
	for _, c := range res.IPs {
		if c.Address.IP.To4() == nil {
			continue
		}
		if c.Interface != nil && *c.Interface < len(res.Interfaces) && res.Interfaces[*c.Interface].Sandbox == "" {
			continue // the host side
		}
		ipc = c
		break
	}
	if ipc == nil {
		return false
	}
	addr, _ := netip.AddrFromSlice(ipc.Address.IP.To4())
	bits, _ := ipc.Address.Mask.Size()
	l.Address = netip.PrefixFrom(addr, bits)
	gw, _ := netip.AddrFromSlice(ipc.Gateway.To4())
	hasDefault := false
	for _, r := range res.Routes {
		if r.Dst.IP.To4() == nil {
			continue
		}
		dst, _ := netip.AddrFromSlice(r.Dst.IP.To4())
		ones, _ := r.Dst.Mask.Size()
		prefix := netip.PrefixFrom(dst, ones).Masked()
		if prefix == l.Address.Masked() {
			continue // on the link
		}
		rgw, _ := netip.AddrFromSlice(r.GW.To4())
		if !rgw.IsValid() {
			rgw = gw
		}
		if ones == 0 {
			hasDefault = true
			if !gw.IsValid() {
				gw = rgw
			}
		}
		l.Routes = append(l.Routes, dhcp.Route{Dst: prefix, Gateway: rgw})
	}
	if gw.IsValid() {
		l.Router = gw
		if len(l.Routes) > 0 && !hasDefault {
			l.Routes = append(l.Routes, dhcp.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: gw})
		}
	}
	return true
}
