// Package uploadapi is converge's cdi-apiserver for uploads: the
// aggregated API upload.cdi.kubevirt.io/v1beta1 that CDI's apiserver
// serves (containerized-data-importer pkg/apiserver/apiserver.go
// uploadHandler), served by converge-controller (internal/aggregated) while
// a native CDI exists.
//
// Its one resource is uploadtokenrequests, with the one verb create: POST
// /apis/upload.cdi.kubevirt.io/v1beta1/namespaces/NS/uploadtokenrequests
// with an UploadTokenRequest whose spec.pvcName names a PVC of NS answers
// the same object with status.token filled in: a token (api/uploadtoken,
// CDI's payload claims, signed ES256, valid Options.Lifetime, CDI's 5
// minutes by default) that lets its bearer upload into that PVC through
// the upload proxy (operators/cdi/uploadproxy) and the node's upload
// server. Nothing is stored: as with CDI, a request is not an object one
// can get or list. Who may upload is RBAC, checked by the API server's
// SubjectAccessReview before the handler runs: create on
// uploadtokenrequests in API group upload.cdi.kubevirt.io in the namespace
// (CDI's cdi.kubevirt.io:edit and :admin ClusterRoles grant it). A body
// that is not an UploadTokenRequest, or one without spec.pvcName, is 400.
//
// The signing key is the one operators/cdi/uploadtoken keeps (EnsureKeys:
// a Secret, its public half published for the verifiers).
package uploadapi
