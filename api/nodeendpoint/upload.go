package nodeendpoint

const (
	// UploadAddressAnnotation on a Node is the host:port its agent serves
	// DataVolume uploads on.
	UploadAddressAnnotation = "cdi.converge.dev/upload-address"
	// UploadCertSHA256Annotation on a Node is the lowercase hex SHA-256 of
	// the DER bytes of the agent's upload serving certificate; clients
	// accept only that certificate.
	UploadCertSHA256Annotation = "cdi.converge.dev/upload-cert-sha256"
	// UploadPath is CDI's uploadproxy path for a synchronous upload.
	UploadPath = "/v1beta1/upload"
	// UploadAsyncPath is CDI's uploadproxy path for an upload answered
	// once the body is received, before conversion.
	UploadAsyncPath = "/v1beta1/upload-async"
)

// Upload is the DataVolume upload endpoint of a node's cdi-importer agent
// (`converge-node cdi-importer`, nodeplane/cdi/uploadserver), CDI's
// cdi-uploadproxy and cdi-uploadserver in one: POST UploadPath or
// UploadAsyncPath with "Authorization: Bearer <upload token>" and the
// image as body.
var Upload = Service{
	Name:                 "upload",
	Agent:                "converge-node cdi-importer",
	Serves:               "DataVolume uploads",
	AddressAnnotation:    UploadAddressAnnotation,
	CertSHA256Annotation: UploadCertSHA256Annotation,
}
