// Package nodeendpoint is a node-local TLS endpoint published on its Node
// and pinned by fingerprint: a node agent listens on a host:port with a
// fresh self-signed serving certificate, publishes the address and the
// certificate's SHA-256 as two annotations on its Node, and clients read
// them back and accept only that certificate, so no CA is distributed.
//
// A Service names one such endpoint (its annotation keys, the agent that
// serves it, the words its messages use); nodeplane/vm/console (VMI
// consoles, `converge-node vm`) and nodeplane/cdiupload (DataVolume
// uploads, `converge-node cdi-importer`) are its two users. Service.Run
// is the agent side (listen, advertise, certify, publish, serve),
// Service.FromNode and Service.ClientTLS the client side.
package nodeendpoint
