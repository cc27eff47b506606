package uploadtoken

import "k8s.io/apimachinery/pkg/types"

// Where the keys are kept by default: in converge-controller's namespace,
// which the node agents are told with --upload-keys-namespace.
const (
	// DefaultNamespace is converge-controller's namespace.
	DefaultNamespace = "converge-system"
	// KeySecretName is the Secret holding the signing key
	// (PrivateKeyField); only the issuer reads it.
	KeySecretName = "converge-upload-token-key"
	// PublicKeysName is the ConfigMap holding the verification keys
	// (PublicKeysField); verifiers need get on it.
	PublicKeysName = "converge-upload-token-public-keys"
)

// DefaultKeySecret gives the Secret KeySecretName in DefaultNamespace.
func DefaultKeySecret() types.NamespacedName {
	return types.NamespacedName{Namespace: DefaultNamespace, Name: KeySecretName}
}

// DefaultPublicKeys gives the ConfigMap PublicKeysName in
// DefaultNamespace.
func DefaultPublicKeys() types.NamespacedName {
	return types.NamespacedName{Namespace: DefaultNamespace, Name: PublicKeysName}
}
