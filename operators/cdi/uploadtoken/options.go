package uploadtoken

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
)

// Options say where the keys are kept and how long tokens live. Use
// DefaultOptions and change fields.
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
}

// DefaultOptions gives the Secret converge-system/converge-upload-token-key
// and the ConfigMap converge-system/converge-upload-token-public-keys
// (tokenapi.DefaultKeySecret, tokenapi.DefaultPublicKeys) and tokens valid
// 5 minutes (CDI's cdi-apiserver default).
func DefaultOptions() Options {
	return Options{
		KeySecret:     tokenapi.DefaultKeySecret(),
		PublicKeys:    tokenapi.DefaultPublicKeys(),
		TokenLifetime: 5 * time.Minute,
	}
}
