// Package console serves the serial console of this node's
// VirtualMachineInstances over HTTPS, the job KubeVirt's virt-handler
// console endpoint does for `virtctl console`.
//
// The agent (converge-node vm) runs Run: a TLS listener with a fresh
// self-signed serving certificate, whose address and SHA-256 fingerprint it
// publishes as annotations on its Node (nodeendpoint.Console of
// api/nodeendpoint, served with nodeplane/endpoint). A client reads the
// VMI's status.nodeName, takes the Endpoint from that Node
// (nodeendpoint.Console.FromNode) and dials it with the user's bearer
// token (internal/nodeclient DialConsole, `converge vm console`); the
// certificate is pinned, so no CA needs to be distributed.
//
// A session is a WebSocket (github.com/coder/websocket) at
// /v1/namespaces/{namespace}/virtualmachineinstances/{name}/console
// (nodeendpoint.ConsolePath, subprotocol nodeendpoint.ConsoleSubprotocol)
// carrying the console's bytes both ways as binary messages. The server
// authenticates the token with a TokenReview, authorizes it with a
// SubjectAccessReview for verb get on virtualmachineinstances/console in
// API group subresources.kubevirt.io (KubeVirt's RBAC for `virtctl
// console`: kubevirt pkg/virt-operator/resource/generate/rbac/cluster.go,
// the kubevirt.io:edit and kubevirt.io:admin roles), checks that the VMI
// runs on this node, and allows one session per VMI at a time (a second
// one gets 409, as virt-handler refuses a second console).
//
// The package has no cgo: the console itself comes from an Opener, which
// the agent adapts from nodeplane/vm/libvirt (Conn.OpenConsole).
package console
