// Package upload is converge's cdi-apiserver role for uploads: it issues
// time-limited signed upload tokens scoped to one PVC (the DataVolume's
// PVC, same name), as CDI's cdi-apiserver does for UploadTokenRequests.
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
// A token is a JWT (github.com/go-jose/go-jose/v4, the library CDI uses in
// pkg/token) carrying CDI's payload claims (Claims: operation "Upload",
// name, namespace, resource persistentvolumeclaims) and the registered
// claims iss, iat, nbf and exp (default lifetime 5 minutes, CDI's
// apiserver default). It is signed ES256 (CDI signs RS256) with a private
// key kept in a Secret (EnsureKeys creates it when absent). The public
// keys are published in a ConfigMap that verifiers (the node agents'
// upload servers, nodeplane/cdiupload) read with PublicKeys and Verify: a
// new key is appended there, never replacing the old ones, so tokens signed
// before a key change keep verifying until they expire.
package uploadtoken
