package webhook

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Lifetimes are how long the CA and the serving certificate live and how
// long before their end they are re-issued (HCO certConfig ca/server
// duration and renewBefore).
type Lifetimes struct {
	CADuration, CARenewBefore         time.Duration
	ServerDuration, ServerRenewBefore time.Duration
}

// DefaultLifetimes gives HCO's certConfig defaults: CA 48h renewed 24h
// before its end, serving certificate 24h renewed 12h before its end.
func DefaultLifetimes() Lifetimes {
	return Lifetimes{
		CADuration: 48 * time.Hour, CARenewBefore: 24 * time.Hour,
		ServerDuration: 24 * time.Hour, ServerRenewBefore: 12 * time.Hour,
	}
}

// Validate reports lifetimes that cannot work: a non-positive value, a
// renewBefore not shorter than its duration (the certificate would be
// re-issued on every check) or a CA shorter-lived than the serving
// certificate (HCO's rule ca.duration >= server.duration).
func (l Lifetimes) Validate() error {
	for _, p := range []struct {
		name string
		d, r time.Duration
	}{{"ca", l.CADuration, l.CARenewBefore}, {"server", l.ServerDuration, l.ServerRenewBefore}} {
		if p.d <= 0 || p.r <= 0 {
			return fmt.Errorf("webhookcert: %s duration (%s) and renewBefore (%s) must be positive", p.name, p.d, p.r)
		}
		if p.r >= p.d {
			return fmt.Errorf("webhookcert: %s renewBefore (%s) must be shorter than its duration (%s)", p.name, p.r, p.d)
		}
	}
	if l.CADuration < l.ServerDuration {
		return fmt.Errorf("webhookcert: ca duration (%s) must not be shorter than server duration (%s)", l.CADuration, l.ServerDuration)
	}
	return nil
}

// TargetKind is the kind of object whose caBundle is injected.
type TargetKind string

// The kinds of Target.
const (
	// ValidatingWebhook sets webhooks[*].clientConfig.caBundle of a
	// ValidatingWebhookConfiguration.
	ValidatingWebhook TargetKind = "ValidatingWebhookConfiguration"
	// MutatingWebhook sets webhooks[*].clientConfig.caBundle of a
	// MutatingWebhookConfiguration.
	MutatingWebhook TargetKind = "MutatingWebhookConfiguration"
	// CRDConversion sets spec.conversion.webhook.clientConfig.caBundle of a
	// CustomResourceDefinition whose conversion strategy is Webhook.
	CRDConversion TargetKind = "CustomResourceDefinition"
	// APIService sets spec.caBundle of an aggregated API's APIService
	// (apiregistration.k8s.io/v1), served with the same certificate
	// (operators/virt/virtapi).
	APIService TargetKind = "APIService"
)

// Target names one cluster-scoped object that must trust the CA (as
// cert-controller's WebhookInfo).
type Target struct {
	// Kind says which caBundle field is set.
	Kind TargetKind
	// Name is the object's name.
	Name string
}

// Options configure a Manager.
type Options struct {
	// Secret is where the CA and serving certificate are kept (created when
	// absent). Required.
	Secret types.NamespacedName
	// Hosts are the DNS names and IP addresses the serving certificate
	// covers, e.g. the Service's <svc>.<ns>.svc or 127.0.0.1. Required.
	Hosts []string
	// Targets get the CA bundle injected. A target that does not exist yet
	// is skipped until it does. A Registrar adds those of the
	// Configurations it registers (Manager.AddTargets).
	Targets []Target
	// Lifetimes of the certificates; zero means DefaultLifetimes.
	Lifetimes Lifetimes
	// CAName is the CA's common name prefix (default "webhookcert-ca").
	CAName string
	// FieldOwner is the server-side apply field manager that owns the
	// injected caBundle fields (default "webhookcert").
	FieldOwner string
	// Resync is the longest wait between two checks (default 1m): the
	// Secret and targets are re-read at least this often, and at each
	// certificate's renewal time.
	Resync time.Duration
	// Now is the clock (default time.Now); tests inject their own.
	Now func() time.Time
}

func (o Options) withDefaults() (Options, error) {
	if o.Secret.Name == "" || o.Secret.Namespace == "" {
		return o, fmt.Errorf("webhookcert: Options.Secret needs a name and a namespace")
	}
	if len(o.Hosts) == 0 {
		return o, fmt.Errorf("webhookcert: Options.Hosts is empty")
	}
	if o.Lifetimes == (Lifetimes{}) {
		o.Lifetimes = DefaultLifetimes()
	}
	if err := o.Lifetimes.Validate(); err != nil {
		return o, err
	}
	if o.CAName == "" {
		o.CAName = "webhookcert-ca"
	}
	if o.FieldOwner == "" {
		o.FieldOwner = "webhookcert"
	}
	if o.Resync <= 0 {
		o.Resync = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}
