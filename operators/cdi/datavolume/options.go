package datavolume

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/operators/cdi/clonetoken"
)

// Options are the cdi-controller role's settings.
type Options struct {
	// CRDPoll is how often Setup checks whether the DataVolume CRD is
	// installed yet.
	CRDPoll time.Duration
	// Concurrency is how many DataVolumes are reconciled in parallel.
	Concurrency int
	// SkipNameValidation lets several managers in one process register
	// the controller (controller-runtime requires unique controller names
	// per process); for tests.
	SkipNameValidation bool
	// Gate, when set, holds the controller back once the CRD is
	// established until it returns nil: the CDI operator's gate of its
	// cdi-controller role (operand.Gates.Wait), open once a native CDI
	// exists. An error other than the context's ends the manager.
	Gate func(ctx context.Context) error
	// CDI, when set, gives the CDI CR whose spec.config the controller
	// follows (filesystemOverhead: Overhead), nil when there is none: the
	// native CDI the CDI operator deploys (cdioperator.Active). Unset, or
	// giving nil, PVCs get no filesystem overhead, as with CDI before its
	// CDIConfig exists.
	CDI func(ctx context.Context) (*unstructured.Unstructured, error)
	// Tokens, when set, checks the clone tokens of clones from another
	// namespace (the DataVolume admission webhook's,
	// operators/cdi/dvadmission); unset, such clones fail
	// CloneUnauthorized.
	Tokens *clonetoken.Tokens
}

// DefaultOptions gives CRDPoll 5 s and Concurrency 4.
func DefaultOptions() Options {
	return Options{CRDPoll: 5 * time.Second, Concurrency: 4}
}
