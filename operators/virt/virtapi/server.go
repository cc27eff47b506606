package virtapi

import (
	"context"
	"errors"
	"net"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GroupVersion is the API the server serves, KubeVirt's
// v1.SubresourceGroupVersions[0].
var GroupVersion = schema.GroupVersion{Group: "subresources.kubevirt.io", Version: "v1"}

// CertSource is where the serving certificate comes from: the webhook
// certificate Manager (internal/webhook) of converge-controller.
type CertSource interface {
	// ServingPEM gives the current certificate and key (nil before the
	// first one).
	ServingPEM() (cert, key []byte)
	// OnRotate registers a function called each time they change.
	OnRotate(func())
}

// Options configure a Server.
type Options struct {
	// Listener is where the server accepts connections. Required.
	Listener net.Listener
	// Cert is the serving certificate. Required.
	Cert CertSource
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

// Server is the aggregated API server of subresources.kubevirt.io/v1.
type Server struct {
	o       Options
	serving chan struct{}
}

// New checks o and gives a Server; nothing listens before Run.
func New(o Options) (*Server, error) {
	if o.Listener == nil || o.Cert == nil || o.Client == nil {
		return nil, errors.New("virtapi: Options.Listener, Cert and Client are required")
	}
	return &Server{o: o, serving: make(chan struct{})}, nil
}

// Serving is closed once the server accepts requests.
func (s *Server) Serving() <-chan struct{} { return s.serving }

// Run builds the generic API server (delegated authentication and
// authorization, the handler chain of k8s.io/apiserver with console and
// vnc as long-running requests, discovery of the group) and serves until
// ctx ends. It fails when the delegated authentication cannot be set up,
// e.g. without rights to read kube-system/extension-apiserver-authentication.
func (s *Server) Run(ctx context.Context) error {
	gs, err := s.build()
	if err != nil {
		return err
	}
	return gs.PrepareRun().RunWithContext(ctx)
}

// codecs encode the Status errors and discovery documents.
var codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(scheme)
}()

func (s *Server) build() (*genericapiserver.GenericAPIServer, error) {
	cfg := genericapiserver.NewConfig(codecs)
	cfg.EffectiveVersion = compatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", "")
	// A console session lasts as long as the user keeps it.
	cfg.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"), sets.NewString("console", "vnc"))
	ss := genericoptions.NewSecureServingOptions().WithLoopback()
	ss.Listener = s.o.Listener
	ss.ServerCert.GeneratedCert = &certProvider{src: s.o.Cert}
	if err := ss.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, err
	}
	authn := genericoptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = s.o.Kubeconfig
	if err := authn.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		return nil, err
	}
	authz := genericoptions.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFile = s.o.Kubeconfig
	if err := authz.ApplyTo(&cfg.Authorization); err != nil {
		return nil, err
	}
	gs, err := cfg.Complete(nil).New("converge-virt-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	s.install(gs)
	gs.AddPostStartHookOrDie("converge-virt-api-serving", func(genericapiserver.PostStartHookContext) error {
		close(s.serving)
		return nil
	})
	return gs, nil
}

// certProvider serves the CertSource's certificate to k8s.io/apiserver's
// dynamic serving certificate controller, telling it of each rotation.
type certProvider struct{ src CertSource }

func (p *certProvider) Name() string { return "converge-webhook-certificate" }

func (p *certProvider) CurrentCertKeyContent() ([]byte, []byte) { return p.src.ServingPEM() }

func (p *certProvider) AddListener(l dynamiccertificates.Listener) { p.src.OnRotate(l.Enqueue) }
