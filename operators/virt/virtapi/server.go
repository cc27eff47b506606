package virtapi

import (
	"context"
	"errors"
	"net"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/aggregated"
)

// GroupVersion is the API the server serves, KubeVirt's
// v1.SubresourceGroupVersions[0].
var GroupVersion = schema.GroupVersion{Group: "subresources.kubevirt.io", Version: "v1"}

// Options configure the server New gives.
type Options struct {
	// Listener is where the server accepts connections. Required.
	Listener net.Listener
	// Cert is the serving certificate. Required.
	Cert aggregated.CertSource
	// Kubeconfig is the kubeconfig file the delegated authentication and
	// authorization use (TokenReviews, SubjectAccessReviews, the
	// extension-apiserver-authentication ConfigMap); empty: the in-cluster
	// configuration, as every aggregated API server.
	Kubeconfig string
	// Client reads VirtualMachines, VirtualMachineInstances and Nodes and
	// writes the lifecycle patches, as converge-controller, straight
	// through the API server (not a cache: a patch tests what was read).
	// Its scheme knows kubevirt.io/v1 and the client-go types. Required.
	Client client.Client
	// ConsoleToken gives the bearer token the node agents' console
	// servers authenticate converge-controller with (its ServiceAccount's:
	// internal/nodeclient BearerToken of its rest.Config). Required for
	// the console.
	ConsoleToken func(ctx context.Context) (string, error)
	// Log receives the console sessions' lines; zero: discarded.
	Log logr.Logger
}

// API gives the aggregated API subresources.kubevirt.io/v1 serving with
// o.Client, o.ConsoleToken and o.Log (Listener, Cert and Kubeconfig are
// not read), as aggregated.Setup and aggregated.New take it.
func API(o Options) aggregated.API {
	s := &server{o: o}
	return aggregated.API{
		GroupVersion: GroupVersion,
		Install:      s.install,
		// A console session lasts as long as the user keeps it.
		LongRunning: []string{"console", "vnc"},
		// as virt-operator's (pkg/virt-operator/resource/generate/
		// components/apiservices.go)
		GroupPriorityMinimum: 1000, VersionPriority: 15,
		Component: "virt-api",
	}
}

// New checks o and gives the aggregated API server of
// subresources.kubevirt.io/v1; nothing listens before its Run.
func New(o Options) (*aggregated.Server, error) {
	if o.Client == nil {
		return nil, errors.New("virtapi: Options.Client is required")
	}
	return aggregated.New(aggregated.Options{Listener: o.Listener, Cert: o.Cert, Kubeconfig: o.Kubeconfig}, API(o))
}

// server is the handlers' state.
type server struct{ o Options }

// codecs encode the Status errors and discovery documents.
var codecs = aggregated.Codecs
