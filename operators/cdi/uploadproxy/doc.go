// Package uploadproxy is converge's cdi-uploadproxy: the one HTTPS
// address users upload disk images to (`virtctl image-upload
// --uploadproxy-url`, `converge image-upload`), served by
// converge-controller behind its Service, which routes each upload to the
// upload server of the node that holds the volume (nodeplane/cdi/
// uploadserver), as CDI's uploadproxy routes to the upload server pod of
// the PVC (containerized-data-importer pkg/uploadproxy/uploadproxy.go).
//
// It serves CDI's paths: POST /v1beta1/upload and /v1beta1/upload-async
// (the body is the image), /v1beta1/upload-form and
// /v1beta1/upload-form-async (a multipart form whose "file" part is the
// image, as browsers send), and GET /healthz. Each upload carries
// "Authorization: Bearer <token>" from an UploadTokenRequest. The proxy
// checks the token (signature against the public keys the issuer
// publishes, api/uploadtoken; expiry; operation upload on a PVC) before
// it reads a byte of the body or dials anything: a missing header or a
// token for something other than a PVC upload is 400, a forged or expired
// one 401, as CDI's proxy answers. It then follows the token's PVC to its
// PersistentVolume and that PV's node (503 naming what is missing, as
// CDI's "rejecting Upload Request for PVC … that doesn't exist"), reads
// the node's upload endpoint (nodeendpoint.Upload: address and pinned
// certificate fingerprint on the Node) and streams the image there with
// the same token, which the node's server checks again together with the
// DataVolume; the node's answer (status and body) is the proxy's answer.
package uploadproxy
