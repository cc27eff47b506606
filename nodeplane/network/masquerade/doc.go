// Package masquerade is KubeVirt's masquerade binding inside a VMI's
// network namespace (virt-launcher's pod stand-in; kubevirt
// pkg/network/setup/netpod/netpod.go masqueradeBindingSpec and
// pkg/network/setup/netpod/masquerade/masquerade.go):
//
//   - the pod interface (eth0) keeps the pod IP the cluster's IPAM gave;
//   - a bridge k6t-eth0 with the VM network's gateway address (10.0.2.1/24
//     by default, or the first host of spec.networks[].pod.vmNetworkCIDR)
//     and KubeVirt's static MAC 02:00:00:00:00:00 has the VM's tap as its
//     port; the guest gets the next address (10.0.2.2) by DHCP (package
//     dhcp);
//   - IPv4 forwarding is on in the namespace and route_localnet on the
//     bridge;
//   - NAT rules in the namespace's nftables table ip nat, as KubeVirt's:
//     the guest's traffic leaving is masqueraded to the pod IP, and
//     traffic arriving on the pod interface is forwarded (DNAT) to the
//     guest on the interface's declared ports and port ranges, or on every
//     port when none is declared; connections from the namespace's
//     loopback are forwarded too (output chain, SNAT to the gateway).
//
// NetworkOf derives the addresses from a CIDR, NAT programs the rules
// with github.com/google/nftables (netlink, no nft binary), and Plumb
// makes the links. IPv4 only: a pod's IPv6 address is not passed on to
// the guest.
package masquerade
