package main

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/internal/webhook"
)

// registerRetry is how long a failed webhook registration waits before it
// is tried again.
const registerRetry = 5 * time.Second

// registerWebhook takes the certificate of the webhook server (certs; nil
// for an externally managed one) and apply, which writes one webhook
// configuration with the given PEM CA bundle (nil: left to webhookcert or
// the external manager). It waits until certs is ready, calls apply until
// it succeeds (logging each failure as "registering <what>", retrying
// every registerRetry), then triggers certs so the CA is injected again
// should it have rotated meanwhile, and logs "<what> registered". It gives
// false when ctx ended first.
func registerWebhook(ctx context.Context, log logr.Logger, what string, certs *webhook.Manager, apply func(ctx context.Context, caBundle []byte) error) bool {
	var caBundle []byte
	if certs != nil {
		select {
		case <-certs.Ready():
		case <-ctx.Done():
			return false
		}
		caBundle = certs.CABundle()
	}
	for {
		err := apply(ctx, caBundle)
		if err == nil {
			break
		}
		log.Error(err, "registering "+what+"; retrying", "after", registerRetry)
		select {
		case <-time.After(registerRetry):
		case <-ctx.Done():
			return false
		}
	}
	if certs != nil {
		certs.Trigger()
	}
	log.Info(what + " registered")
	return true
}
