package uploadtoken

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
)

// Options configure the Issuer. Use DefaultOptions and change fields.
type Options struct {
	// KeySecret is the Secret holding the signing key
	// (tokenapi.PrivateKeyField).
	KeySecret types.NamespacedName
	// PublicKeys is the ConfigMap where verifiers read the public keys
	// (tokenapi.PublicKeysField, tokenapi.PublicKeys); node agents need
	// get on it.
	PublicKeys types.NamespacedName
	// TokenLifetime is how long an issued token is valid.
	TokenLifetime time.Duration
	// GCAfterExpiry is how long a request is kept after its token expired
	// before the Issuer deletes it.
	GCAfterExpiry time.Duration
	// CRDPoll is how often Setup checks whether the UploadTokenRequest CRD
	// is installed yet.
	CRDPoll time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// SkipNameValidation lets several managers in one process register the
	// controller; for tests.
	SkipNameValidation bool
	// Gate, when set, holds the Issuer back once the CRD is established
	// until it returns nil: the CDI operator's gate of its cdi-apiserver
	// role (operand.Gates.Wait), open once a native CDI exists. An error
	// other than the context's ends the manager.
	Gate func(ctx context.Context) error
}

// DefaultOptions gives the Secret converge-system/converge-upload-token-key
// and the ConfigMap converge-system/converge-upload-token-public-keys
// (tokenapi.DefaultKeySecret, tokenapi.DefaultPublicKeys), tokens valid 5
// minutes (CDI's cdi-apiserver default), requests deleted 1 minute after
// their token expires, CRDPoll 5 s.
func DefaultOptions() Options {
	return Options{
		KeySecret:     tokenapi.DefaultKeySecret(),
		PublicKeys:    tokenapi.DefaultPublicKeys(),
		TokenLifetime: 5 * time.Minute,
		GCAfterExpiry: time.Minute,
		CRDPoll:       5 * time.Second,
	}
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}
