package console

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/nodeplane/endpoint"
)

// Options configure Run.
type Options struct {
	// NodeName is this node: only its VMIs are served, and its Node gets
	// the annotations. Required.
	NodeName string
	// BindAddress is the host:port to listen on.
	BindAddress string
	// AdvertiseAddress is the host:port clients dial, published on the
	// Node; empty: endpoint.AdvertiseAddress's default (the bound host,
	// else the Node's InternalIP, with the bound port).
	AdvertiseAddress string
	// CertLifetime is the serving certificate's lifetime; the agent makes a
	// new one at every start.
	CertLifetime time.Duration
	// Log receives session and refusal lines; zero: discarded.
	Log logr.Logger
}

// DefaultOptions gives Options for node nodeName: bind :8186, advertise
// the Node's address, a certificate valid one year.
func DefaultOptions(nodeName string) Options {
	return Options{NodeName: nodeName, BindAddress: ":8186", CertLifetime: 365 * 24 * time.Hour}
}

// Run listens on opts.BindAddress, makes a serving certificate for the
// advertised host, publishes the nodeendpoint.Console endpoint on the
// Node and serves the console (Server) over TLS until ctx ends; then it
// closes the listener and every session (endpoint.Run). It returns nil
// after ctx ends, or the error of the listen, the Node read, the
// publication or the server, naming what failed.
func Run(ctx context.Context, c client.Client, opener Opener, opts Options) error {
	if opts.NodeName == "" {
		return errors.New("console server: a node name is required")
	}
	ro := endpoint.RunOptions{NodeName: opts.NodeName, BindAddress: opts.BindAddress,
		AdvertiseAddress: opts.AdvertiseAddress, CertLifetime: opts.CertLifetime, Log: opts.Log}
	return endpoint.Run(ctx, c, c, nodeendpoint.Console, ro, NewServer(c, opts.NodeName, opener, opts.Log))
}
