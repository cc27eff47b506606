package aggregated

import (
	"context"
	"errors"
	"net"

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
)

// CertSource is where the serving certificate comes from: the webhook
// certificate Manager (internal/webhook) of converge-controller.
type CertSource interface {
	// ServingPEM gives the current certificate and key (nil before the
	// first one).
	ServingPEM() (cert, key []byte)
	// OnRotate registers a function called each time they change.
	OnRotate(func())
}

// API is one group version a Server serves.
type API struct {
	// GroupVersion is the served group version. Required.
	GroupVersion schema.GroupVersion
	// Install adds the handlers of the group (discovery and resources) to
	// gs. Required.
	Install func(gs *genericapiserver.GenericAPIServer)
	// LongRunning are the subresources whose requests last as long as the
	// client keeps them (a console stream), exempt from the request
	// timeout.
	LongRunning []string
	// GroupPriorityMinimum and VersionPriority are the APIService's
	// priorities, as the upstream operator sets them.
	GroupPriorityMinimum, VersionPriority int32
	// Component is the APIService's app.kubernetes.io/component label (the
	// upstream component's name, e.g. "virt-api").
	Component string
}

// APIServiceName is the APIService of the API, named as upstream names
// them: "<version>.<group>".
func (a API) APIServiceName() string { return a.GroupVersion.Version + "." + a.GroupVersion.Group }

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
}

// Server is an aggregated API server of one API.
type Server struct {
	o       Options
	api     API
	serving chan struct{}
}

// New checks o and api and gives a Server; nothing listens before Run.
func New(o Options, api API) (*Server, error) {
	if o.Listener == nil || o.Cert == nil {
		return nil, errors.New("aggregated: Options.Listener and Cert are required")
	}
	if api.GroupVersion.Group == "" || api.Install == nil {
		return nil, errors.New("aggregated: API.GroupVersion and Install are required")
	}
	return &Server{o: o, api: api, serving: make(chan struct{})}, nil
}

// Serving is closed once the server accepts requests.
func (s *Server) Serving() <-chan struct{} { return s.serving }

// Run builds the generic API server (delegated authentication and
// authorization, the handler chain of k8s.io/apiserver, the API's
// handlers) and serves until ctx ends. It fails when the delegated
// authentication cannot be set up, e.g. without rights to read
// kube-system/extension-apiserver-authentication.
func (s *Server) Run(ctx context.Context) error {
	gs, err := s.build()
	if err != nil {
		return err
	}
	return gs.PrepareRun().RunWithContext(ctx)
}

// Codecs encode metav1 Status errors and discovery documents; the APIs'
// handlers answer errors with them
// (responsewriters.ErrorNegotiated(err, Codecs, gv, w, r)).
var Codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(scheme)
}()

func (s *Server) build() (*genericapiserver.GenericAPIServer, error) {
	cfg := genericapiserver.NewConfig(Codecs)
	cfg.EffectiveVersion = compatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", "")
	cfg.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"), sets.NewString(s.api.LongRunning...))
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
	name := "converge-" + s.api.Component
	gs, err := cfg.Complete(nil).New(name, genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	s.api.Install(gs)
	gs.AddPostStartHookOrDie(name+"-serving", func(genericapiserver.PostStartHookContext) error {
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
