package domain

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"sort"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/nodeplane/network/dhcp"
)

// PodInterfaceDefault gives KubeVirt's default NIC for a VMI spec that
// declares no interfaces and no networks and does not set
// spec.domain.devices.autoattachPodInterface to false: the interface
// "default" with the masquerade binding on the pod network "default"
// (kubevirt pkg/network/vmispec/defaults.go SetDefaultNetworkInterface,
// called by virt-api's VMI mutating webhook and by virt-controller when it
// creates a VMI, with the cluster's default network interface, masquerade
// unless the KubeVirt CR says otherwise). ok is false when the spec gets
// no default: it declares interfaces or networks, or opts out.
//
// converge applies the default on the node, where the VMI runs: the VM
// validation webhook is a validating one, and a VMI from a file has no
// API server to mutate it. Build gives the default NIC when the node has
// a pod network, that is when Options.ResolveTap resolves the default
// pod network to a tap (the agent's network setup does, when
// converge-node vm has a pod network configuration); on a node without
// one, such a VMI gets no NIC, and autoattachPodInterface: true is
// refused.
func PodInterfaceDefault(spec *kubevirtv1.VirtualMachineInstanceSpec) (ifaces []kubevirtv1.Interface, networks []kubevirtv1.Network, ok bool) {
	if a := spec.Domain.Devices.AutoattachPodInterface; a != nil && !*a {
		return nil, nil, false
	}
	if len(spec.Domain.Devices.Interfaces) > 0 || len(spec.Networks) > 0 {
		return nil, nil, false
	}
	return []kubevirtv1.Interface{*kubevirtv1.DefaultMasqueradeNetworkInterface()}, []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}, true
}

// ReservedMAC is the masquerade bridge's MAC (KubeVirt's
// StaticMasqueradeBridgeMAC), which a masquerade NIC may not take.
const ReservedMAC = v1alpha1.MasqueradeBridgeMAC

func (b *builder) interfaces(devs *libvirtxml.DomainDeviceList) {
	spec := &b.vmi.Spec
	ifaces, nets := spec.Domain.Devices.Interfaces, spec.Networks
	defaulted := false
	if di, dn, ok := PodInterfaceDefault(spec); ok {
		if b.podNetworkHere(dn[0]) {
			ifaces, nets, defaulted = di, dn, true
		} else if a := spec.Domain.Devices.AutoattachPodInterface; a != nil && *a {
			b.errs.Add("spec.domain.devices.autoattachPodInterface", "true: KubeVirt would attach the pod network with masquerade, and this node has no pod network (converge-node vm --pod-network-conf-dir): declare an interface on a network the node has, or set it to false")
		}
	}
	// paths of a defaulted NIC name the field that asks for it
	ifPath := func(i int) string { return fmt.Sprintf("spec.domain.devices.interfaces[%d]", i) }
	netPath := func(j int) string { return fmt.Sprintf("spec.networks[%d]", j) }
	if defaulted {
		ifPath = func(int) string { return "spec.domain.devices.interfaces (KubeVirt's default interface)" }
		netPath = func(int) string { return "spec.networks (KubeVirt's default pod network)" }
	}
	networks := map[string]int{}
	for j, n := range nets {
		networks[n.Name] = j
	}
	pods := 0
	for j, n := range nets {
		if n.Pod != nil {
			if pods++; pods == 2 {
				b.errs.Add(netPath(j), "more than one pod network (as KubeVirt, a VMI has one)")
			}
			b.vmNetworkCIDR(netPath(j)+".pod", n.Pod)
		}
	}
	used := map[string]bool{}
	for i, iface := range ifaces {
		p := ifPath(i)
		j, ok := networks[iface.Name]
		if !ok {
			b.errs.Add(p+".name", "no network named %q in spec.networks", iface.Name)
			continue
		}
		used[iface.Name] = true
		network := nets[j]
		np := netPath(j)
		b.ports(p, iface)
		if iface.Bridge == nil && iface.Masquerade == nil {
			if iface.InterfaceBindingMethod == (kubevirtv1.InterfaceBindingMethod{}) && iface.Binding == nil {
				b.errs.Add(p, "no binding: set masquerade: {} (pod network) or bridge: {}")
			}
			continue // other bindings are rejected by the support table
		}
		if network.Pod == nil && network.Multus == nil {
			b.errs.Add(np, "network %q has no source: expected pod or multus", network.Name)
			continue
		}
		if iface.Masquerade != nil && network.Pod == nil {
			b.errs.Add(p+".masquerade", "the masquerade binding needs the pod network, as in KubeVirt, and network %q is not it", network.Name)
			continue
		}
		var src libvirtxml.DomainInterfaceSource
		var target *libvirtxml.DomainInterfaceTarget
		var mtu *libvirtxml.DomainInterfaceMTU
		tap, isTap := Tap{}, false
		if b.opts.ResolveTap != nil {
			var err error
			if tap, isTap, err = b.opts.ResolveTap(b.vmi.Namespace, network); err != nil {
				b.errs.Add(np, "network %q: %v", network.Name, err)
				continue
			}
		}
		switch {
		case isTap:
			if tap.Name == "" || len(tap.Name) > 15 || strings.ContainsAny(tap.Name, "/ \t\n") {
				b.errs.Add(np, "network %q: tap name %q: expected 1 to 15 bytes without '/' or spaces", network.Name, tap.Name)
				continue
			}
			src.Ethernet = &libvirtxml.DomainInterfaceSourceEthernet{}
			target = &libvirtxml.DomainInterfaceTarget{Dev: tap.Name, Managed: "yes"}
			if tap.MTU > 0 {
				mtu = &libvirtxml.DomainInterfaceMTU{Size: uint(tap.MTU)}
			}
		case iface.Masquerade != nil:
			b.errs.Add(p+".masquerade", "this node has no pod network to masquerade behind (converge-node vm --pod-network-conf-dir names the cluster's CNI configuration)")
			continue
		case b.opts.ResolveBridge == nil:
			b.errs.Add(np, "network %q: this node has no bridge resolver", network.Name)
			continue
		default:
			bridge, err := b.opts.ResolveBridge(b.vmi.Namespace, network)
			if err != nil {
				b.errs.Add(np, "network %q: %v", network.Name, err)
				continue
			}
			src.Bridge = &libvirtxml.DomainInterfaceSourceBridge{Bridge: bridge}
			if iface.DHCPOptions != nil {
				b.errs.Add(p+".dhcpOptions", "the interface is on the node bridge %s, where converge serves no DHCP (it serves the interfaces it plumbs: masquerade, and bridge on CNI networks)", bridge)
			}
		}
		for _, e := range dhcp.CheckInterfaceOptions(iface.DHCPOptions) {
			b.errs.Add(p+".dhcpOptions."+e.Field, "%s", e.Reason)
		}
		model := iface.Model
		if model == "" {
			model = "virtio"
		} else if !contains(nicModels, model) {
			b.errs.Add(p+".model", "%q: expected one of %s", model, strings.Join(nicModels, ", "))
		}
		mac := MAC(string(b.vmi.UID), iface.Name)
		if iface.MacAddress != "" {
			hw, err := net.ParseMAC(iface.MacAddress)
			switch {
			case err != nil || len(hw) != 6:
				b.errs.Add(p+".macAddress", "%q: expected a 6-byte MAC such as 52:54:00:12:34:56", iface.MacAddress)
			case iface.Masquerade != nil && hw.String() == ReservedMAC:
				b.errs.Add(p+".macAddress", "%s is reserved for the masquerade bridge (as in KubeVirt)", ReservedMAC)
			default:
				mac = hw.String()
			}
		}
		devs.Interfaces = append(devs.Interfaces, libvirtxml.DomainInterface{
			MAC:    &libvirtxml.DomainInterfaceMAC{Address: mac},
			Source: &src,
			Target: target,
			MTU:    mtu,
			Model:  &libvirtxml.DomainInterfaceModel{Type: model},
			Boot:   b.bootOrder(p+".bootOrder", iface.BootOrder),
			Alias:  &libvirtxml.DomainAlias{Name: "ua-" + iface.Name},
		})
	}
	for j, n := range nets {
		if !used[n.Name] {
			b.errs.Add(netPath(j)+".name", "network %q is not used by any interface", n.Name)
		}
	}
}

// podNetworkHere reports whether the node resolves the default pod
// network n to a tap (it has a pod network).
func (b *builder) podNetworkHere(n kubevirtv1.Network) bool {
	if b.opts.ResolveTap == nil {
		return false
	}
	_, ok, err := b.opts.ResolveTap(b.vmi.Namespace, n)
	return err == nil && ok
}

// vmNetworkCIDR checks spec.networks[].pod.vmNetworkCIDR as the
// masquerade binding uses it (nodeplane/network/masquerade NetworkOf):
// an IPv4 CIDR with at least four addresses.
func (b *builder) vmNetworkCIDR(path string, pod *kubevirtv1.PodNetwork) {
	if pod.VMNetworkCIDR == "" {
		return
	}
	p, err := netip.ParsePrefix(pod.VMNetworkCIDR)
	switch {
	case err != nil || !p.Addr().Is4():
		b.errs.Add(path+".vmNetworkCIDR", "%q: expected an IPv4 CIDR such as 10.0.2.0/24", pod.VMNetworkCIDR)
	case p.Bits() > 30:
		b.errs.Add(path+".vmNetworkCIDR", "%q: too small: at least 4 addresses are needed (network, gateway, guest, broadcast)", pod.VMNetworkCIDR)
	}
}

var portName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// ports checks ports and portRanges as KubeVirt's VMI admitter
// (pkg/network/admitter/netiface.go validatePortConfiguration,
// validatePortRangesConfiguration): ports of TCP or UDP (default TCP) in
// 1 to 65535 with unique IANA service names, and port ranges (at most 10,
// not overlapping, not with ports) with the masquerade binding only. The
// masquerade binding forwards them; with the bridge binding every port
// reaches the guest anyway.
func (b *builder) ports(p string, iface kubevirtv1.Interface) {
	names := map[string]bool{}
	for k, port := range iface.Ports {
		pp := fmt.Sprintf("%s.ports[%d]", p, k)
		if port.Name != "" {
			if len(port.Name) > 15 || !portName.MatchString(port.Name) || !strings.ContainsAny(port.Name, "abcdefghijklmnopqrstuvwxyz") || strings.Contains(port.Name, "--") {
				b.errs.Add(pp+".name", "%q: expected an IANA service name (at most 15 lower-case letters, digits and single dashes, with a letter)", port.Name)
			} else if names[port.Name] {
				b.errs.Add(pp+".name", "%q is given twice", port.Name)
			}
			names[port.Name] = true
		}
		if port.Port < 1 || port.Port > 65535 {
			b.errs.Add(pp+".port", "%d: expected 1 to 65535", port.Port)
		}
		if port.Protocol != "" && port.Protocol != "TCP" && port.Protocol != "UDP" {
			b.errs.Add(pp+".protocol", "%q: expected TCP or UDP", port.Protocol)
		}
	}
	if len(iface.PortRanges) == 0 {
		return
	}
	if iface.Masquerade == nil {
		b.errs.Add(p+".portRanges", "port ranges are forwarded by the masquerade binding only (as in KubeVirt)")
	}
	if len(iface.Ports) > 0 {
		b.errs.Add(p+".portRanges", "set ports or portRanges, not both (as in KubeVirt)")
	}
	if len(iface.PortRanges) > 10 {
		b.errs.Add(p+".portRanges", "%d ranges: at most 10 (as in KubeVirt)", len(iface.PortRanges))
	}
	type span struct {
		first, last int32
		k           int
	}
	byProto := map[string][]span{}
	for k, r := range iface.PortRanges {
		rp := fmt.Sprintf("%s.portRanges[%d]", p, k)
		switch {
		case r.Protocol != "TCP" && r.Protocol != "UDP":
			b.errs.Add(rp+".protocol", "%q: expected TCP or UDP", r.Protocol)
		case r.Start < 1 || r.Start > 65535:
			b.errs.Add(rp+".start", "%d: expected 1 to 65535", r.Start)
		case r.End < 1 || r.End > 65535:
			b.errs.Add(rp+".end", "%d: expected 1 to 65535", r.End)
		case r.Start > r.End:
			b.errs.Add(rp+".start", "%d is after end %d", r.Start, r.End)
		default:
			byProto[r.Protocol] = append(byProto[r.Protocol], span{r.Start, r.End, k})
		}
	}
	for proto, spans := range byProto {
		sort.Slice(spans, func(i, j int) bool { return spans[i].first < spans[j].first })
		for i := 1; i < len(spans); i++ {
			if spans[i].first <= spans[i-1].last {
				b.errs.Add(fmt.Sprintf("%s.portRanges[%d]", p, spans[i].k), "%s %d-%d overlaps %d-%d", proto, spans[i].first, spans[i].last, spans[i-1].first, spans[i-1].last)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
