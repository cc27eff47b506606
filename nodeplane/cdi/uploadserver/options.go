package uploadserver

import (
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
)

// Options configure the upload server of one node.
type Options struct {
	// Volumes says which PVs are this node's and where their disk images
	// are (NodeName, DriverName, Pools) and tunes the importer (Importer;
	// its Retries, Progress are set per upload). The cdi-importer agent
	// passes its own importcontroller.Options. NodeName and Pools are
	// required.
	Volumes importcontroller.Options
	// PublicKeys is the ConfigMap with the token verification keys
	// (uploadtoken.DefaultPublicKeys, where the issuer publishes them);
	// the agent needs get on it.
	PublicKeys types.NamespacedName
	// BindAddress is the host:port to listen on.
	BindAddress string
	// AdvertiseAddress is the host:port clients dial, published on the
	// Node; empty: the bound host, else the Node's InternalIP, with the
	// bound port (endpoint.AdvertiseAddress).
	AdvertiseAddress string
	// CertLifetime is the serving certificate's lifetime; a new one is
	// made at every start.
	CertLifetime time.Duration
	// CRDPoll is how often Setup checks whether the DataVolume CRD is
	// installed yet.
	CRDPoll time.Duration
	// Log receives refusals and completed uploads; zero: discarded.
	Log logr.Logger
	// SkipNameValidation lets several managers in one process register the
	// ReadyMarker controller; for tests.
	SkipNameValidation bool
}

// DefaultOptions gives Options for an agent with volume options vol: the
// public keys uploadtoken.DefaultPublicKeys, bind :8187 (the console's is
// :8186), certificate valid one year, CRDPoll 5 s.
func DefaultOptions(vol importcontroller.Options) Options {
	return Options{
		Volumes:      vol,
		PublicKeys:   uploadtoken.DefaultPublicKeys(),
		BindAddress:  ":8187",
		CertLifetime: 365 * 24 * time.Hour,
		CRDPoll:      5 * time.Second,
	}
}
