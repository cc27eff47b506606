package masquerade

import (
	"fmt"
	"net/netip"
)

// DefaultCIDR is the VM network when spec.networks[].pod.vmNetworkCIDR is
// unset (kubevirt pkg/virt-launcher/virtwrap/api DefaultVMCIDR).
const DefaultCIDR = "10.0.2.0/24"

// Network is a masquerade interface's VM network: Gateway is the
// in-namespace bridge's address with the network's prefix length (the
// guest's router, DHCP server and DNS forwarder address in KubeVirt's
// terms), Guest the address the guest gets.
type Network struct {
	Gateway netip.Prefix
	Guest   netip.Addr
}

// NetworkOf gives the Network of an IPv4 CIDR ("" is DefaultCIDR): the
// first host address is the gateway, the second the guest's, as KubeVirt's
// GenerateMasqueradeGatewayAndVmIPAddrs (pkg/network/link/address.go),
// which needs at least four addresses (network, gateway, guest,
// broadcast).
func NetworkOf(cidr string) (Network, error) {
	if cidr == "" {
		cidr = DefaultCIDR
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return Network{}, fmt.Errorf("VM network %q: expected an IPv4 CIDR such as %s", cidr, DefaultCIDR)
	}
	if !p.Addr().Is4() {
		return Network{}, fmt.Errorf("VM network %q: expected an IPv4 CIDR (the masquerade binding is IPv4 only)", cidr)
	}
	if p.Bits() > 30 {
		return Network{}, fmt.Errorf("VM network %q: too small: at least 4 addresses are needed (network, gateway, guest, broadcast)", cidr)
	}
	base := p.Masked().Addr()
	gw := base.Next()
	return Network{Gateway: netip.PrefixFrom(gw, p.Bits()), Guest: gw.Next()}, nil
}
