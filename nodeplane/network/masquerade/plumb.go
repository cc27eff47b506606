package masquerade

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// BridgeMAC is the in-namespace bridge's MAC, KubeVirt's
// StaticMasqueradeBridgeMAC (pkg/network/link/mac.go): the guest's
// gateway keeps its MAC across restarts of the VMI.
// The address is the contract's (v1alpha1.MasqueradeBridgeMAC), which
// the MAC pool never hands out.
var BridgeMAC = func() net.HardwareAddr {
	m, err := net.ParseMAC(v1alpha1.MasqueradeBridgeMAC)
	if err != nil {
		panic("masquerade: v1alpha1.MasqueradeBridgeMAC: " + err.Error())
	}
	return m
}()

// BridgeName gives the in-namespace bridge of a pod interface:
// "k6t-<podIf>", virt-launcher's name.
func BridgeName(podIf string) string { return "k6t-" + podIf }

// Binding is one masquerade interface in a VMI's network namespace.
type Binding struct {
	// Netns is the path of the VMI's network namespace.
	Netns string
	// Tap is the VM's tap, already in Netns.
	Tap string
	// MTU of the bridge and the tap: the pod interface's; 0 leaves the
	// kernel's.
	MTU int
	// NAT has the pod interface, the bridge, the addresses and the ports.
	NAT NAT
}

// Plumb makes b inside its namespace and is idempotent: the bridge with
// BridgeMAC, the gateway address and route_localnet, the tap as its
// port, both up, IPv4 forwarding on, and the NAT rules (replaced as a
// whole, NAT.Apply).
func Plumb(b Binding) error {
	id := fmt.Sprintf("masquerade binding of tap %s to %s in %s", b.Tap, b.NAT.PodIf, b.Netns)
	if err := b.NAT.Validate(); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	if err := ns.WithNetNSPath(b.Netns, func(ns.NetNS) error { return b.links() }); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	if err := b.NAT.Apply(b.Netns); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}

// links runs inside the namespace.
func (b Binding) links() error {
	if _, err := netlink.LinkByName(b.NAT.PodIf); err != nil {
		return fmt.Errorf("pod interface %s: %w", b.NAT.PodIf, err)
	}
	tap, err := netlink.LinkByName(b.Tap)
	if err != nil {
		return fmt.Errorf("tap: %w", err)
	}
	name := b.NAT.Bridge
	br, err := netlink.LinkByName(name)
	if err != nil {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU, attrs.HardwareAddr = name, b.MTU, BridgeMAC
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
			return fmt.Errorf("creating bridge %s: %w", name, err)
		}
		if br, err = netlink.LinkByName(name); err != nil {
			return fmt.Errorf("bridge %s: %w", name, err)
		}
	}
	if br.Attrs().HardwareAddr.String() != BridgeMAC.String() {
		if err := netlink.LinkSetHardwareAddr(br, BridgeMAC); err != nil {
			return fmt.Errorf("bridge %s MAC: %w", name, err)
		}
	}
	gw := b.NAT.Network.Gateway
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: gw.Addr().AsSlice(), Mask: net.CIDRMask(gw.Bits(), 32)}}
	if err := netlink.AddrReplace(br, addr); err != nil {
		return fmt.Errorf("bridge %s address %s: %w", name, gw, err)
	}
	if b.MTU > 0 && tap.Attrs().MTU != b.MTU {
		if err := netlink.LinkSetMTU(tap, b.MTU); err != nil {
			return fmt.Errorf("tap MTU %d: %w", b.MTU, err)
		}
	}
	if tap.Attrs().MasterIndex != br.Attrs().Index {
		if err := netlink.LinkSetMaster(tap, br); err != nil {
			return fmt.Errorf("tap into %s: %w", name, err)
		}
	}
	for _, l := range []netlink.Link{tap, br} {
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("%s up: %w", l.Attrs().Name, err)
		}
	}
	// /proc/sys/net is the calling thread's namespace's
	for key, val := range map[string]string{
		"net/ipv4/ip_forward":                       "1",
		"net/ipv4/conf/" + name + "/route_localnet": "1",
	} {
		if _, err := sysctl.Sysctl(key, val); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", key, val, err)
		}
	}
	return nil
}

// ErrNotPlumbed is wrapped by Verify when something of the binding is
// missing.
var ErrNotPlumbed = errors.New("not plumbed")

// Verify checks that b's links are in place (the tap an up port of the
// bridge, the bridge up with the gateway address) and that the NAT table
// has its chains. A missing piece wraps ErrNotPlumbed; Plumb makes it
// again.
func Verify(b Binding) error {
	err := ns.WithNetNSPath(b.Netns, func(ns.NetNS) error {
		br, err := netlink.LinkByName(b.NAT.Bridge)
		if err != nil {
			return fmt.Errorf("%w: bridge %s: %v", ErrNotPlumbed, b.NAT.Bridge, err)
		}
		tap, err := netlink.LinkByName(b.Tap)
		if err != nil {
			return fmt.Errorf("%w: tap: %v", ErrNotPlumbed, err)
		}
		if tap.Attrs().MasterIndex != br.Attrs().Index {
			return fmt.Errorf("%w: tap %s is not a port of %s", ErrNotPlumbed, b.Tap, b.NAT.Bridge)
		}
		for _, l := range []netlink.Link{br, tap} {
			if l.Attrs().Flags&net.FlagUp == 0 {
				return fmt.Errorf("%w: %s is down", ErrNotPlumbed, l.Attrs().Name)
			}
		}
		as, err := netlink.AddrList(br, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.IPNet.IP.Equal(b.NAT.Network.Gateway.Addr().AsSlice()) {
				return nil
			}
		}
		return fmt.Errorf("%w: bridge %s has no address %s", ErrNotPlumbed, b.NAT.Bridge, b.NAT.Network.Gateway)
	})
	if err == nil {
		var chains []string
		if chains, err = Chains(b.Netns); err == nil {
			have := map[string]bool{}
			for _, c := range chains {
				have[c] = true
			}
			for _, c := range []string{PreroutingChain, PostroutingChain, OutputChain, PreInboundChain, PostInboundChain} {
				if !have[c] {
					err = fmt.Errorf("%w: table ip %s has no chain %s", ErrNotPlumbed, TableName, c)
					break
				}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("masquerade binding of tap %s to %s in %s: %w", b.Tap, b.NAT.PodIf, b.Netns, err)
	}
	return nil
}
