package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Handler is one handler of the webhook server and the path it is served
// at: an admission handler (ctrlwebhook.Admission) or a CRD conversion
// webhook.
type Handler struct {
	// Path is the server path, e.g. "/convert".
	Path string
	// Handler answers the API server's requests on Path.
	Handler http.Handler
}

// Configuration describes one ValidatingWebhookConfiguration or
// MutatingWebhookConfiguration that converge-controller serves and
// registers (Registrar.Register): its hooks, the handlers behind them and
// what its registration waits for. Exactly one of Validating and Mutating
// is set.
type Configuration struct {
	// Name is the webhook configuration's name.
	Name string
	// What names the webhook in log lines: "<What> <Name> registered",
	// e.g. "the hco-webhook".
	What string
	// LogName is the name of the logger the registration logs with.
	LogName string
	// Validating are the hooks of a ValidatingWebhookConfiguration, in
	// order.
	Validating []ValidatingHook
	// Mutating are the hooks of a MutatingWebhookConfiguration, in order.
	Mutating []MutatingHook
	// Handlers are served on the webhook server at once, in order; every
	// hook's Path must have one. A path may also serve something no hook
	// calls, such as a CRD conversion webhook (see Conversions).
	Handlers []Handler
	// Conversions are the CRDs ("<plural>.<group>") whose conversion
	// webhook one of Handlers is: the certificate Manager injects its CA
	// into their spec.conversion.webhook (the CRDs themselves are applied
	// by whoever owns them).
	Conversions []string
	// CRDs ("<plural>.<group>") must be established before the
	// configuration is registered, so that failurePolicy Fail blocks
	// nothing before the resources it checks exist.
	CRDs []string
	// Ready, when set, is waited for after the CRDs: it returns once the
	// handlers can answer (nil), or with an error that stops the
	// registration and the manager. An error after its context ended is
	// not reported.
	Ready func(ctx context.Context) error
	// LogValues, when set, gives key/value pairs for the registration's
	// log lines; it is called once Ready returned.
	LogValues func() []any
}

// Kind gives the kind of the webhook configuration: ValidatingWebhook or
// MutatingWebhook.
func (c Configuration) Kind() TargetKind {
	if len(c.Mutating) > 0 {
		return MutatingWebhook
	}
	return ValidatingWebhook
}

// Targets gives the objects that must trust the webhook server's CA: the
// webhook configuration and the CRDs of Conversions.
func (c Configuration) Targets() []Target {
	ts := []Target{{Kind: c.Kind(), Name: c.Name}}
	for _, crd := range c.Conversions {
		ts = append(ts, Target{Kind: CRDConversion, Name: crd})
	}
	return ts
}

// Validate reports a Configuration that cannot be registered: no name,
// both or neither of Validating and Mutating, a handler without a path or
// handler, a path served twice, or a hook whose path no handler serves.
func (c Configuration) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("no name"))
	}
	if (len(c.Validating) > 0) == (len(c.Mutating) > 0) {
		errs = append(errs, errors.New("want either validating or mutating hooks"))
	}
	served := map[string]bool{}
	for _, h := range c.Handlers {
		switch {
		case h.Path == "" || h.Handler == nil:
			errs = append(errs, fmt.Errorf("handler %q: want a path and a handler", h.Path))
		case served[h.Path]:
			errs = append(errs, fmt.Errorf("path %s is served twice", h.Path))
		}
		served[h.Path] = true
	}
	type hook struct{ name, path string }
	var hooks []hook
	for _, h := range c.Validating {
		hooks = append(hooks, hook{h.Name, h.Path})
	}
	for _, h := range c.Mutating {
		hooks = append(hooks, hook{h.Name, h.Path})
	}
	for _, h := range hooks {
		if !served[h.path] {
			errs = append(errs, fmt.Errorf("webhook %s: no handler serves its path %q", h.name, h.path))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s %s: %w", c.Kind(), c.Name, err)
	}
	return nil
}

// Serve takes a controller-runtime webhook server and serves every
// handler at its path.
func (c Configuration) Serve(srv ctrlwebhook.Server) {
	for _, h := range c.Handlers {
		srv.Register(h.Path, h.Handler)
	}
}

// ApplyConfiguration takes the endpoint and a PEM CA bundle (nil leaves
// the caBundle to the Manager's injection) and gives the webhook
// configuration: a ValidatingWebhookConfiguration of ValidatingWebhook
// entries or a MutatingWebhookConfiguration of MutatingWebhook entries,
// one per hook, in order.
func (c Configuration) ApplyConfiguration(ep Endpoint, caBundle []byte) runtime.ApplyConfiguration {
	if c.Kind() == MutatingWebhook {
		mwc := acv1.MutatingWebhookConfiguration(c.Name)
		for _, h := range c.Mutating {
			mwc.WithWebhooks(ep.MutatingWebhook(h, caBundle))
		}
		return mwc
	}
	vwc := acv1.ValidatingWebhookConfiguration(c.Name)
	for _, h := range c.Validating {
		vwc.WithWebhooks(ep.ValidatingWebhook(h, caBundle))
	}
	return vwc
}

// Apply takes a client, the endpoint, a PEM CA bundle (may be nil) and a
// field manager, and creates or updates the webhook configuration with
// server-side apply (forcing ownership of the fields it sets). Errors
// name the configuration first.
func (c Configuration) Apply(ctx context.Context, cl client.Client, ep Endpoint, caBundle []byte, fieldOwner string) error {
	if err := ep.validate(); err != nil {
		return fmt.Errorf("%s %s: %w", c.Kind(), c.Name, err)
	}
	if err := cl.Apply(ctx, c.ApplyConfiguration(ep, caBundle), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("%s %s: applying: %w", c.Kind(), c.Name, err)
	}
	return nil
}

// what names the configuration in log lines.
func (c Configuration) what() string {
	if c.What == "" {
		return string(c.Kind()) + " " + c.Name
	}
	return c.What + " " + c.Name
}
