// Package netattach attaches VM NICs to CNI bridge networks for the VM
// agent, KubeVirt's bridge binding without pods:
//
//   - ConfigSource gives a NetworkAttachmentDefinition's CNI configuration
//     (APISource from the API server, DirSource from files);
//   - Attacher runs CNI ADD, CHECK and DEL through libcni with the real
//     plugin binaries, in the node's (host) network namespace, with a
//     result cache under the agent's state directory so DEL works after a
//     crash;
//   - EnsureNetns/DeleteNetns manage the VMI's named network namespace
//     (virt-launcher's pod namespace stand-in);
//   - Bind moves the VM's tap into that namespace and bridges it with the
//     CNI interface (virt-launcher's k6t-<if>), the pod interface keeping
//     no IP and a random locally administered MAC;
//   - VMINetworks ties them together per VMI and implements the agent's
//     NetworkSetup (Setup = ADD, Plumb = Bind, Check, Teardown = DEL and
//     namespace removal).
//
// Everything needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root). On kernels
// without CONFIG_BRIDGE_VLAN_FILTERING a network with a VLAN is refused by
// the bridge plugin; macspoofchk needs the nft binary (nftables).
package netattach
