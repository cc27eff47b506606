package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// minWait keeps the loop from spinning when a renewal time has just passed.
const minWait = 100 * time.Millisecond

// Manager keeps the Secret, the served certificate and the targets'
// caBundle in step (the job of cert-controller's CertRotator and
// ReconcileWH, with separate CA and serving renewBefore, a CA overlap in
// the bundle and no certificate files). It runs on every replica that
// serves the webhook (it is a controller-runtime Runnable that needs no
// leader election); replicas share the Secret through optimistic
// concurrency, so they serve certificates of one CA bundle.
type Manager struct {
	c     client.Client
	mu    sync.Mutex
	opts  Options
	cert  atomic.Pointer[tls.Certificate]
	pem   atomic.Pointer[[2][]byte] // the serving certificate and key
	ca    atomic.Pointer[[]byte]
	subs  []func() // called when the served certificate changed
	wake  chan struct{}
	ready chan struct{}
	once  sync.Once
}

// New takes a client that reads straight from the API server (not a
// cache: the Secret and targets are read a few times a minute) and the
// options, and gives a Manager. Nothing is read or issued before Sync or
// Start.
func New(c client.Client, o Options) (*Manager, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Manager{c: c, opts: o, wake: make(chan struct{}, 1), ready: make(chan struct{})}, nil
}

// SetLifetimes takes new lifetimes (e.g. from a changed HC certConfig),
// validates them and wakes the Manager; certificates that are now due
// are re-issued at once, the others at their new renewal time.
func (m *Manager) SetLifetimes(l Lifetimes) error {
	if err := l.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	m.opts.Lifetimes = l
	m.mu.Unlock()
	m.Trigger()
	return nil
}

// AddTargets takes more targets that must trust the CA (those of a
// Configuration a Registrar registers) and adds the ones the Manager does
// not have yet; the next Sync injects the bundle into them.
func (m *Manager) AddTargets(ts ...Target) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range ts {
		if !slices.Contains(m.opts.Targets, t) {
			// Clip: a copy of the options a Sync holds keeps its own array.
			m.opts.Targets = append(slices.Clip(m.opts.Targets), t)
		}
	}
}

// Trigger wakes a running Manager for an immediate Sync, e.g. right after
// a target was created.
func (m *Manager) Trigger() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Start runs Sync until ctx ends: at each renewal time, at least every
// Resync, after a Trigger, and every second while Sync fails. It gives
// nil when ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("webhookcert")
	for {
		o := m.options()
		wait := o.Resync
		next, err := m.Sync(ctx)
		switch {
		case err != nil:
			logger.Error(err, "syncing the webhook certificate")
			wait = min(wait, time.Second)
		case next.Sub(o.Now()) < wait:
			wait = max(next.Sub(o.Now()), minWait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-m.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// NeedLeaderElection gives false: every replica serves, so every replica
// needs the certificate.
func (m *Manager) NeedLeaderElection() bool { return false }

// Sync does one pass: it reads the Secret, issues what PlanSecret says is
// due, writes the Secret back (creating it if needed; a conflicting write
// by another replica is retried on its data), serves the Secret's
// serving certificate and injects its CA bundle into every target. It
// gives the next renewal time.
func (m *Manager) Sync(ctx context.Context) (time.Time, error) {
	o := m.options()
	var plan Plan
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		var err error
		plan, err = m.reconcileSecret(ctx, o)
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	if plan.CARotated || plan.ServingRotated {
		log.FromContext(ctx).WithName("webhookcert").Info("issued webhook certificate",
			"secret", o.Secret, "caRotated", plan.CARotated, "servingRotated", plan.ServingRotated)
	}
	kp, err := tls.X509KeyPair(plan.Data[corev1.TLSCertKey], plan.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return time.Time{}, fmt.Errorf("webhookcert: loading the serving certificate: %w", err)
	}
	m.cert.Store(&kp)
	pair := [2][]byte{plan.Data[corev1.TLSCertKey], plan.Data[corev1.TLSPrivateKeyKey]}
	if old := m.pem.Swap(&pair); old == nil || string(old[0]) != string(pair[0]) {
		m.mu.Lock()
		subs := slices.Clone(m.subs)
		m.mu.Unlock()
		for _, f := range subs {
			f()
		}
	}
	bundle := plan.Data[CABundleKey]
	m.ca.Store(&bundle)
	var errs []error
	for _, t := range o.Targets {
		if _, err := Inject(ctx, m.c, t, bundle, o.FieldOwner); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return plan.Next, errors.Join(errs...)
	}
	m.once.Do(func() { close(m.ready) })
	return plan.Next, nil
}

func (m *Manager) reconcileSecret(ctx context.Context, o Options) (Plan, error) {
	s := &corev1.Secret{}
	err := m.c.Get(ctx, o.Secret, s)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return Plan{}, fmt.Errorf("webhookcert: reading Secret %s: %w", o.Secret, err)
	}
	plan, err := PlanSecret(s.Data, o.Lifetimes, o.CAName, o.Hosts, o.Now())
	if err != nil || !plan.Changed {
		return plan, err
	}
	if !exists {
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: o.Secret.Name, Namespace: o.Secret.Namespace},
			Type:       corev1.SecretTypeTLS,
			Data:       plan.Data,
		}
		return plan, m.c.Create(ctx, s, client.FieldOwner(o.FieldOwner))
	}
	s.Data = plan.Data
	return plan, m.c.Update(ctx, s, client.FieldOwner(o.FieldOwner))
}

// GetCertificate gives the current serving certificate, for
// tls.Config.GetCertificate (controller-runtime's webhook.Options.TLSOpts);
// it fails until the first successful Sync.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := m.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("webhookcert: no serving certificate yet")
}

// ServingPEM gives the PEM serving certificate and key of the last Sync
// (nil, nil before it), for a server that loads its certificate as PEM
// (k8s.io/apiserver's dynamiccertificates, operators/virt/virtapi).
func (m *Manager) ServingPEM() (cert, key []byte) {
	if p := m.pem.Load(); p != nil {
		return p[0], p[1]
	}
	return nil, nil
}

// OnRotate registers f, called (from Sync) each time the served
// certificate changes, the first one included.
func (m *Manager) OnRotate(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs = append(m.subs, f)
}

// CABundle gives the PEM CA bundle of the last Sync (nil before it).
func (m *Manager) CABundle() []byte {
	if b := m.ca.Load(); b != nil {
		return *b
	}
	return nil
}

// Ready is closed after the first Sync that served a certificate and
// injected the bundle into every existing target.
func (m *Manager) Ready() <-chan struct{} { return m.ready }

// ReadyCheck is a controller-runtime healthz.Checker: it fails until
// Ready is closed.
func (m *Manager) ReadyCheck(*http.Request) error {
	select {
	case <-m.ready:
		return nil
	default:
		return errors.New("webhookcert: serving certificate not ready")
	}
}

func (m *Manager) options() Options {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.opts
}
