// Package uploadtoken keeps the upload token signing key of converge's
// cdi-apiserver role: the key that signs the tokens the aggregated API
// upload.cdi.kubevirt.io hands out (operators/cdi/uploadapi) and whose
// public half the verifiers (the upload proxy, operators/cdi/uploadproxy,
// and the node agents' upload servers, nodeplane/cdi/uploadserver) check
// tokens against, as CDI's apiserver keeps its key pair in a Secret and
// publishes the public key for its uploadproxy.
//
// The token format is api/uploadtoken (a JWT with CDI's payload claims,
// signed ES256; default lifetime 5 minutes, CDI's apiserver default). The
// signing key is kept in a Secret (EnsureKeys creates it when absent); the
// public keys are published in a ConfigMap that verifiers read with
// api/uploadtoken's PublicKeys and Verify: a new key is appended there,
// never replacing the old ones, so tokens signed before a key change keep
// verifying until they expire. Keeper caches the key for a server.
package uploadtoken
