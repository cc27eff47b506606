package importcontroller

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/nodeplane/cdi/importer"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// Options configure the agent. Use DefaultOptions and set NodeName and
// Pools.
type Options struct {
	// NodeName is this node's Node name. Required.
	NodeName string
	// DriverName is the CSI driver whose PersistentVolumes are imported
	// into (PV spec.csi.driver). Default hostpath.DefaultDriverName.
	DriverName string
	// Pools are the hostpath driver's storage pools on this node, as given
	// to converge-node hostpath-csi --storage-pool. The first is the pool
	// of a PV whose volume attributes name none. At least one.
	Pools []hostpath.Pool
	// Importer tunes each HTTP import (its own retries of transient
	// download failures, qemu-img path). Its Progress and
	// ProgressInterval are set by the agent.
	Importer importer.Options
	// InsecureRegistries are the registries (host[:port], as in a
	// registry source's URL) pulled from over plain HTTP or HTTPS without
	// verification: the CDI CR's spec.config.insecureRegistries, which the
	// CDI operator passes as --insecure-registry.
	InsecureRegistries []string
	// OCIArchiveDir is the node directory oci-archive:// registry sources
	// are read in; empty refuses them.
	OCIArchiveDir string
	// Retries is how many times a failed import is run again (so
	// Retries+1 runs) before the DataVolume is Failed; permanent failures
	// are not retried (see the package doc).
	Retries int
	// Backoff is the wait before the first rerun, doubled each time up to
	// MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// StatusInterval is the minimum time between two progress writes.
	StatusInterval time.Duration
	// CRDPoll is how often the agent checks whether the DataVolume CRD is
	// installed yet.
	CRDPoll time.Duration
	// Concurrency is how many imports run at once on this node.
	Concurrency int
	// SkipNameValidation lets several managers in one process register
	// the controller; for tests.
	SkipNameValidation bool
	// CloneKeys is the ConfigMap of the token verification keys
	// converge-controller publishes (uploadtoken.DefaultPublicKeys in
	// its namespace): a clone from another namespace is copied only when
	// the DataVolume's extended clone token verifies against them. Empty
	// Name refuses such clones.
	CloneKeys types.NamespacedName
	// Setups are called by Run with the agent's manager after Setup, to
	// add more node roles to the same process (the upload server:
	// uploadserver.Setup). An error stops Run.
	Setups []func(ctrl.Manager) error
}

// DefaultOptions gives DriverName hostpath.DefaultDriverName,
// importer.DefaultOptions(), 5 retries with backoff 10 s doubling to 5 min
// (CDI's importer pod restarts follow the kubelet's crash-loop backoff,
// 10 s to 5 min), StatusInterval 1 s, CRDPoll 5 s and Concurrency 2.
func DefaultOptions() Options {
	return Options{
		DriverName:     hostpath.DefaultDriverName,
		Importer:       importer.DefaultOptions(),
		Retries:        5,
		Backoff:        10 * time.Second,
		MaxBackoff:     5 * time.Minute,
		StatusInterval: time.Second,
		CRDPoll:        5 * time.Second,
		Concurrency:    2,
	}
}
