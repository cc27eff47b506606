// Package uploadtoken is the upload token format shared by the token
// issuer (operators/cdi/uploadtoken, the cdi-apiserver role in
// converge-controller) and its verifiers (the node agents' upload servers,
// nodeplane/cdi/uploadserver), as CDI's pkg/token is shared by its
// cdi-apiserver and cdi-uploadproxy.
//
// A token is a JWT (github.com/go-jose/go-jose/v4, the library CDI uses in
// pkg/token) carrying CDI's payload claims (Claims: operation "Upload",
// name, namespace, resource persistentvolumeclaims) and the registered
// claims iss, iat, nbf and exp. It is signed ES256 (CDI signs RS256) with
// Sign and checked with Verify. The signing key is kept in a Secret
// (PrivateKeyField, DefaultKeySecret); the public keys are published in a
// ConfigMap (PublicKeysField, DefaultPublicKeys) that verifiers read with
// PublicKeys: the issuer appends a new key there, never replacing the old
// ones, so tokens signed before a key change keep verifying until they
// expire.
package uploadtoken
