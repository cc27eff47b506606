package webhook

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/crdwait"
)

// ReadyzCheckName is the name of the readiness check a Registrar adds for
// its certificate Manager.
const ReadyzCheckName = "webhook-certificate"

// RegisterOptions configure a Registrar.
type RegisterOptions struct {
	// FieldOwner is the server-side apply field manager of the webhook
	// configurations. Required.
	FieldOwner string
	// CRDPoll is how often a registration checks whether its CRDs are
	// established (default 5s).
	CRDPoll time.Duration
	// Retry is how long a failed registration waits before it applies the
	// configuration again (default 5s).
	Retry time.Duration
}

// DefaultRegisterOptions gives the options converge-controller runs with,
// but for FieldOwner: CRDs polled and failed registrations retried every
// 5s.
func DefaultRegisterOptions() RegisterOptions {
	return RegisterOptions{CRDPoll: 5 * time.Second, Retry: 5 * time.Second}
}

// Registrar is the one registration path of the webhooks served by a
// controller-runtime manager's webhook server: every Configuration is
// served and registered the same way, with one certificate Manager whose
// injection targets are the registered Configurations'.
type Registrar struct {
	mgr   manager.Manager
	c     client.Client
	ep    Endpoint
	certs *Manager
	opts  RegisterOptions
}

// NewRegistrar takes a controller-runtime manager (whose webhook server
// serves the handlers), the Endpoint the API server reaches that server
// at, the certificate Manager of its serving certificate (nil for an
// externally managed certificate, whose caBundle is someone else's job)
// and the options. It adds the certificate Manager to mgr (on every
// replica) with a readiness check named ReadyzCheckName, and gives the
// Registrar. The configurations are applied with a client that reads and
// writes straight through the API server, not mgr's cache.
func NewRegistrar(mgr manager.Manager, ep Endpoint, certs *Manager, o RegisterOptions) (*Registrar, error) {
	if err := ep.validate(); err != nil {
		return nil, err
	}
	if o.FieldOwner == "" {
		return nil, errors.New("webhook: RegisterOptions.FieldOwner is empty")
	}
	d := DefaultRegisterOptions()
	if o.CRDPoll <= 0 {
		o.CRDPoll = d.CRDPoll
	}
	if o.Retry <= 0 {
		o.Retry = d.Retry
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	if certs != nil {
		if err := mgr.Add(certs); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck(ReadyzCheckName, certs.ReadyCheck); err != nil {
			return nil, err
		}
	}
	return &Registrar{mgr: mgr, c: c, ep: ep, certs: certs, opts: o}, nil
}

// Register takes a Configuration, checks it (Configuration.Validate),
// serves its handlers on the manager's webhook server at once, adds its
// Targets to the certificate Manager and adds a leader-only runnable that
// registers it: it waits for cfg.CRDs (polling every CRDPoll), then for
// cfg.Ready, then for the certificate; applies the configuration with the
// certificate's CA bundle until that succeeds (logging each failure as
// "registering <what>; retrying" and retrying every Retry); triggers the
// certificate Manager so that the CA is injected again should it have
// rotated meanwhile; and logs "<what> registered". Registering only once
// the CRDs exist and the handlers are ready keeps failurePolicy Fail from
// blocking anything before then. Call it before the manager starts.
func (r *Registrar) Register(cfg Configuration) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.Serve(r.mgr.GetWebhookServer())
	if r.certs != nil {
		r.certs.AddTargets(cfg.Targets()...)
	}
	log := r.mgr.GetLogger()
	if cfg.LogName != "" {
		log = log.WithName(cfg.LogName)
	}
	return r.mgr.Add(&registration{cfg: cfg, c: r.c, ep: r.ep, certs: r.certs, opts: r.opts, log: log})
}

// registration is the leader-only runnable of one Configuration
// (Registrar.Register).
type registration struct {
	cfg   Configuration
	c     client.Client
	ep    Endpoint
	certs *Manager
	opts  RegisterOptions
	log   logr.Logger
}

// NeedLeaderElection gives true: one replica registers.
func (r *registration) NeedLeaderElection() bool { return true }

// Start registers the configuration as Registrar.Register says. It gives
// nil once registered or when ctx ends first, and cfg.Ready's error.
func (r *registration) Start(ctx context.Context) error {
	if !crdwait.Wait(ctx, r.c, r.opts.CRDPoll, r.cfg.CRDs...) {
		return nil
	}
	if r.cfg.Ready != nil {
		if err := r.cfg.Ready(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	log := r.log
	if r.cfg.LogValues != nil {
		log = log.WithValues(r.cfg.LogValues()...)
	}
	var caBundle []byte
	if r.certs != nil {
		select {
		case <-r.certs.Ready():
		case <-ctx.Done():
			return nil
		}
		caBundle = r.certs.CABundle()
	}
	what := r.cfg.what()
	for {
		err := r.cfg.Apply(ctx, r.c, r.ep, caBundle, r.opts.FieldOwner)
		if err == nil {
			break
		}
		log.Error(err, "registering "+what+"; retrying", "after", r.opts.Retry)
		select {
		case <-time.After(r.opts.Retry):
		case <-ctx.Done():
			return nil
		}
	}
	if r.certs != nil {
		r.certs.Trigger()
	}
	log.Info(what + " registered")
	return nil
}
