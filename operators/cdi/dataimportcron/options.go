package dataimportcron

import (
	"context"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Options are the controller's settings.
type Options struct {
	// CRDPoll is how often Setup checks whether the DataImportCron CRD is
	// installed yet.
	CRDPoll time.Duration
	// Concurrency is how many DataImportCrons are reconciled in parallel
	// (CDI: 3).
	Concurrency int
	// PollTimeout bounds one digest request to a registry.
	PollTimeout time.Duration
	// RetryAfter is when a cron whose registry could not be polled is
	// polled again (its schedule's next time is not advanced meanwhile).
	RetryAfter time.Duration
	// Transport, when set, is the base round tripper of registry requests
	// (nil: go-containerregistry's default); internal/ociregistry's rules
	// wrap it.
	Transport http.RoundTripper
	// SkipNameValidation lets several managers in one process register
	// the controller; for tests.
	SkipNameValidation bool
	// Gate, when set, holds the controller back once the CRD is
	// established until it returns nil: the CDI operator's gate of its
	// cdi-controller role (operand.Gates.Wait). An error other than the
	// context's ends the manager.
	Gate func(ctx context.Context) error
	// CDI, when set, gives the CDI CR whose spec.config.insecureRegistries
	// lists the registries reached over plain HTTP or unverified HTTPS
	// (cdioperator.Active), nil when there is none.
	CDI func(ctx context.Context) (*unstructured.Unstructured, error)
}

// DefaultOptions gives CRDPoll 5 s, Concurrency 3, PollTimeout 30 s and
// RetryAfter 1 min.
func DefaultOptions() Options {
	return Options{CRDPoll: 5 * time.Second, Concurrency: 3, PollTimeout: 30 * time.Second, RetryAfter: time.Minute}
}
