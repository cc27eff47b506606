// Package nodeendpoint is the protocol of converge's node-local TLS
// endpoints, shared by the node agents that serve them and the clients
// that dial them: a node agent listens on a host:port with a fresh
// self-signed serving certificate and publishes the address and the
// certificate's SHA-256 as two annotations on its Node; a client reads
// them back (Service.FromNode) and accepts only that certificate
// (Service.ClientTLS), so no CA is distributed.
//
// A Service names one such endpoint: its annotation keys, the agent that
// serves it and the words its messages use. There are two: Console, the
// VMI serial consoles of `converge-node vm` (nodeplane/vm/console), and
// Upload, the DataVolume uploads of `converge-node cdi-importer`
// (nodeplane/cdi/uploadserver). The agent side (listen, advertise,
// certify, publish, serve) is nodeplane/endpoint; the clients of the
// `converge` CLI are internal/nodeclient.
package nodeendpoint
