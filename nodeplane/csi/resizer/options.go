package resizer

import (
	"errors"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/client-go/kubernetes"
)

// Options configures a Resizer.
type Options struct {
	// Client talks to the API server. It needs list/watch on
	// persistentvolumeclaims, persistentvolumes and storageclasses, patch
	// on persistentvolumes (spec.capacity), update on
	// persistentvolumeclaims/status and create/patch on events. Required.
	Client kubernetes.Interface
	// Identity, Controller and Node are the driver's CSI services, called
	// in-process: GetPluginInfo, NodeGetInfo, ControllerExpandVolume and
	// NodeExpandVolume. Required.
	Identity   csi.IdentityServer
	Controller csi.ControllerServer
	Node       csi.NodeServer
	// ResyncPeriod is how often the informers replay every claim.
	ResyncPeriod time.Duration
	// Threadiness is the number of claim workers.
	Threadiness int
	// RetryMin and RetryMax bound the per-claim exponential backoff of
	// failed expansions.
	RetryMin, RetryMax time.Duration
}

// DefaultOptions returns Options with a 10-minute resync (external-resizer's
// default), 2 workers and retries from 1 s to 5 min; the client and the
// CSI services are left for the caller.
func DefaultOptions() Options {
	return Options{ResyncPeriod: 10 * time.Minute, Threadiness: 2, RetryMin: time.Second, RetryMax: 5 * time.Minute}
}

// Validate reports every missing or invalid field, joined.
func (o Options) Validate() error {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("resizer: Kubernetes client required"))
	}
	if o.Identity == nil || o.Controller == nil || o.Node == nil {
		errs = append(errs, errors.New("resizer: the driver's CSI Identity, Controller and Node services are required"))
	}
	if o.ResyncPeriod <= 0 {
		errs = append(errs, errors.New("resizer: ResyncPeriod must be positive"))
	}
	if o.Threadiness <= 0 {
		errs = append(errs, errors.New("resizer: Threadiness must be positive"))
	}
	if o.RetryMin <= 0 || o.RetryMax < o.RetryMin {
		errs = append(errs, errors.New("resizer: need 0 < RetryMin <= RetryMax"))
	}
	return errors.Join(errs...)
}
