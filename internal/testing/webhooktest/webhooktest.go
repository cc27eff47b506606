// Package webhookcerttest starts a webhookcert Manager for a test whose
// webhook server a real kube-apiserver calls back, so that the tests of
// converge's admission webhooks share one way of getting a serving
// certificate and an injected caBundle.
package webhooktest

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/webhook"
)

// Start creates a webhookcert Manager on c with opts, runs it until t's
// cleanup and waits up to 30 s for its first serving certificate, failing
// t when New refuses opts or no certificate comes. It gives the running
// Manager (its GetCertificate serves the webhook's TLS).
func Start(t testing.TB, c client.Client, opts webhook.Options) *webhook.Manager {
	t.Helper()
	certs, err := webhook.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = certs.Start(ctx) }()
	select {
	case <-certs.Ready():
	case <-time.After(30 * time.Second):
		t.Fatalf("webhookcert Secret %s: no serving certificate within 30s", opts.Secret)
	}
	return certs
}
