package uploadserver

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/nodeendpoint"
)

const (
	// AddressAnnotation on a Node is the host:port its agent serves
	// uploads on.
	AddressAnnotation = "cdi.converge.dev/upload-address"
	// CertSHA256Annotation on a Node is the lowercase hex SHA-256 of the
	// DER bytes of the agent's upload serving certificate; clients accept
	// only that certificate.
	CertSHA256Annotation = "cdi.converge.dev/upload-cert-sha256"
	// UploadPath is CDI's uploadproxy path for a synchronous upload.
	UploadPath = "/v1beta1/upload"
	// UploadAsyncPath is CDI's uploadproxy path for an upload answered
	// once the body is received, before conversion.
	UploadAsyncPath = "/v1beta1/upload-async"
)

// Service is the upload server's node endpoint: published as
// AddressAnnotation and CertSHA256Annotation by `converge-node
// cdi-importer`.
var Service = nodeendpoint.Service{
	Name:                 "upload",
	Agent:                "converge-node cdi-importer",
	Serves:               "DataVolume uploads",
	AddressAnnotation:    AddressAnnotation,
	CertSHA256Annotation: CertSHA256Annotation,
}

// Endpoint is where a node's agent serves uploads and the fingerprint of
// its certificate (nodeendpoint.Endpoint).
type Endpoint = nodeendpoint.Endpoint

// EndpointFromNode reads a Node's upload annotations; the error names the
// Node and says the agent has not published (or published garbage)
// (nodeendpoint.Service.FromNode).
func EndpointFromNode(node *corev1.Node) (Endpoint, error) { return Service.FromNode(node) }

// NodeOfPV gives the node a node-local PV lives on: the first value of a
// required node affinity term on hostpath.TopologyKey or
// kubernetes.io/hostname with operator In; "" when there is none.
func NodeOfPV(pv *corev1.PersistentVolume) string {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return ""
	}
	for _, term := range na.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if (e.Key == hostpath.TopologyKey || e.Key == corev1.LabelHostname) && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) > 0 {
				return e.Values[0]
			}
		}
	}
	return ""
}
