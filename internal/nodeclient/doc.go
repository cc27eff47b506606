// Package nodeclient is the cluster side of the node agents' TLS
// endpoints (api/nodeendpoint): DialConsole opens a VMI's serial console
// at the console endpoint of its node (converge-controller's virt-api,
// operators/virt/virtapi, as KubeVirt's virt-api reaches virt-handler,
// with the token BearerToken gives), Upload streams a disk image to
// the upload endpoint of a volume's node (`converge image-upload dv`, as
// `virtctl image-upload` reaches cdi-uploadproxy), and NodeOfPV finds that
// node from the PersistentVolume. Both clients pin the server's
// certificate to the fingerprint the agent published on its Node.
//
// The package imports nothing of the node side (nodeplane/), so the CLI
// links no node agent code; the servers are nodeplane/vm/console and
// nodeplane/cdi/uploadserver.
package nodeclient
