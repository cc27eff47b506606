package netattach

import (
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/network/masquerade"
)

// masqueradeBinding gives the masquerade binding of a masquerade
// attachment: the pod interface, its bridge k6t-eth0, the VM network of
// the pod network's vmNetworkCIDR, the MTU of the pod interface, and the
// interface's ports and port ranges (none: every port).
func (v *VMINetworks) masqueradeBinding(vmi *kubevirtv1.VirtualMachineInstance, a attachment) (masquerade.Binding, error) {
	path := NetnsPath(NetnsName(vmi.UID))
	cidr := ""
	if a.network.Pod != nil {
		cidr = a.network.Pod.VMNetworkCIDR
	}
	network, err := masquerade.NetworkOf(cidr)
	if err != nil {
		return masquerade.Binding{}, err
	}
	mtu, err := linkMTU(path, a.ifName)
	if err != nil {
		return masquerade.Binding{}, err
	}
	var ports []masquerade.Port
	for _, p := range a.iface.Ports {
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		ports = append(ports, masquerade.Port{Protocol: proto, First: uint16(p.Port), Last: uint16(p.Port)})
	}
	for _, r := range a.iface.PortRanges {
		ports = append(ports, masquerade.Port{Protocol: strings.ToLower(r.Protocol), First: uint16(r.Start), Last: uint16(r.End)})
	}
	return masquerade.Binding{Netns: path, Tap: TapName(vmi.UID, 0), MTU: mtu, NAT: masquerade.NAT{
		PodIf: a.ifName, Bridge: masquerade.BridgeName(a.ifName), Network: network, Ports: ports}}, nil
}

// plumbMasquerade moves the VM's tap into the VMI's namespace and makes
// the masquerade binding there.
func (v *VMINetworks) plumbMasquerade(vmi *kubevirtv1.VirtualMachineInstance, a attachment) error {
	b, err := v.masqueradeBinding(vmi, a)
	if err != nil {
		return err
	}
	target, err := ns.GetNS(b.Netns)
	if err != nil {
		return fmt.Errorf("masquerade binding of tap %s: %w", b.Tap, err)
	}
	defer target.Close()
	if err := moveTap(b.Tap, v.Attacher.opts.HostNetns, target); err != nil {
		return fmt.Errorf("masquerade binding of tap %s to %s in %s: %w", b.Tap, a.ifName, b.Netns, err)
	}
	return masquerade.Plumb(b)
}

// checkMasquerade verifies the masquerade binding and makes it again when
// something is missing.
func (v *VMINetworks) checkMasquerade(vmi *kubevirtv1.VirtualMachineInstance, a attachment) error {
	b, err := v.masqueradeBinding(vmi, a)
	if err != nil {
		return err
	}
	if err := masquerade.Verify(b); err == nil {
		return nil
	} else if !errors.Is(err, masquerade.ErrNotPlumbed) {
		return err
	}
	return v.plumbMasquerade(vmi, a)
}
