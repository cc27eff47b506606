// Package endpoint is the agent side of a node-local TLS endpoint
// (api/nodeendpoint): Run listens on a host:port, works out the address
// clients dial (AdvertiseAddress), makes a fresh self-signed serving
// certificate (NewServingCert, issued with internal/pki), publishes the
// address and the certificate's SHA-256 on its Node (Publish) and serves
// an http.Handler over TLS (Serve) until its context ends. Refusal is how
// a handler answers a request it turns down.
//
// The functions take the nodeendpoint.Service they serve as an argument
// rather than hanging off a server type: the Service is the whole
// configuration they share, and its words name every error. The two users
// are nodeplane/vm/console (nodeendpoint.Console, `converge-node vm`) and
// nodeplane/cdi/uploadserver (nodeendpoint.Upload, `converge-node
// cdi-importer`); their clients, in the `converge` CLI, are
// internal/nodeclient.
package endpoint
