// Package dhcp serves a VM NIC its address by DHCPv4 from inside the VMI's
// network namespace, as KubeVirt's virt-launcher does in the pod
// (kubevirt pkg/network/dhcp/server/server.go SingleClientDHCPServer,
// written on github.com/krolaw/dhcp4; converge's is written on
// github.com/insomniacslk/dhcp's server4):
//
//   - Lease is what one NIC is given: its address and prefix, the router,
//     classless static routes, DNS servers and search domains, host and
//     domain name, MTU, and the interface's dhcpOptions (boot file, TFTP
//     server, NTP servers, private options 224-254);
//   - Reply answers one request for a Lease: an OFFER to a DISCOVER and an
//     ACK to a REQUEST from the NIC's MAC only (a NAK when the client asks
//     for another address), nothing to anyone else;
//   - Serve runs a server for a Lease on one interface of a network
//     namespace (the in-namespace bridge the VM's tap is a port of) until
//     Close.
//
// The masquerade binding offers the guest the address after the gateway
// of the VM network (10.0.2.2 of 10.0.2.0/24); the bridge binding offers
// the address the network's IPAM gave the pod interface, with its
// gateway and routes (kubevirt pkg/network/dhcp/masquerade.go, bridge.go).
// ResolvConf reads the DNS servers and search domains offered, from the
// node's resolv.conf as KubeVirt reads the pod's (pkg/network/dns).
package dhcp
