// Package netattach attaches VM NICs to networks for the VM agent, as
// KubeVirt's virt-launcher does in its pod, without pods:
//
//   - ConfigSource gives a NetworkAttachmentDefinition's CNI configuration
//     (APISource from the API server, DirSource from files); PodNetwork
//     gives the node's pod network configuration, the one the container
//     runtime uses for pods (the first of its configuration directory, or
//     the one named), after checking that host-local's leases are the
//     runtime's;
//   - Attacher runs CNI ADD, CHECK and DEL through libcni with the real
//     plugin binaries, in the node's (host) network namespace, with a
//     result cache under the agent's state directory so DEL works after a
//     crash (one Attacher for the NetworkAttachmentDefinitions' plugins,
//     one for the pod network's, which come from the runtime's directory);
//   - EnsureNetns/DeleteNetns manage the VMI's named network namespace
//     (virt-launcher's pod namespace stand-in);
//   - Bind moves the VM's tap into that namespace and bridges it with the
//     CNI interface (virt-launcher's k6t-<if>), the pod interface keeping
//     no IP and a random locally administered MAC: the bridge binding;
//     package masquerade makes the masquerade binding behind the pod IP;
//   - VMINetworks ties them together per VMI and implements the agent's
//     NetworkSetup (Setup = ADD, Plumb = the bindings and a DHCP server
//     per NIC (package dhcp), Check after an agent restart, Teardown =
//     the DHCP servers stopped, DEL and namespace removal). A VMI that
//     declares no interface gets KubeVirt's default, masquerade on the pod
//     network, when the node has one.
//
// Everything needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root). On kernels
// without CONFIG_BRIDGE_VLAN_FILTERING a network with a VLAN is refused by
// the bridge plugin; macspoofchk needs the nft binary (nftables).
//
// A pod network plugin that looks the pod up in the API server (Multus;
// Calico and Cilium read the pod's labels and annotations) may refuse a
// VMI: there is no pod. Plugins that work from their configuration
// (bridge, ptp, host-local, flannel's delegation to bridge) attach it.
package netattach
