// Package uploadtoken is converge's upload token issuer, the cdi-apiserver
// role for uploads: it issues time-limited signed upload tokens scoped to
// one PVC (the DataVolume's PVC, same name), as CDI's cdi-apiserver does
// for UploadTokenRequests.
//
// CDI serves upload.cdi.kubevirt.io/v1beta1 UploadTokenRequest from an
// aggregated API server that answers the create with status.token filled
// in. converge has no aggregated API server, so UploadTokenRequest is a CRD
// (components/cdi/upload_crd.cue) and the Issuer, a controller in
// converge-controller (Setup), writes status.token of each new request
// through the status subresource; clients create the request and wait for
// the token. Who may upload is ordinary RBAC: create on uploadtokenrequests
// in API group upload.cdi.kubevirt.io in the namespace (CDI's
// cdi.kubevirt.io:edit and :admin ClusterRoles grant it). Requests are
// deleted once their token has expired (plus Options.GCAfterExpiry).
//
// The token format is api/uploadtoken (a JWT with CDI's payload claims,
// signed ES256; default lifetime 5 minutes, CDI's apiserver default). The
// signing key is kept in a Secret (EnsureKeys creates it when absent); the
// public keys are published in a ConfigMap that verifiers (the node
// agents' upload servers, nodeplane/cdi/uploadserver) read with
// api/uploadtoken's PublicKeys and Verify: a new key is appended there,
// never replacing the old ones, so tokens signed before a key change keep
// verifying until they expire.
package uploadtoken
