package cdiupload

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
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

// Endpoint is where a node's agent serves uploads and the fingerprint of
// its certificate.
type Endpoint struct {
	// Address is host:port.
	Address string
	// CertSHA256 is the pinned certificate's fingerprint
	// (console.Fingerprint).
	CertSHA256 string
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate reports an error naming the bad annotation when e is not a
// host:port and a 64-digit lowercase hex fingerprint.
func (e Endpoint) Validate() error {
	if _, _, err := net.SplitHostPort(e.Address); err != nil || e.Address == "" {
		return fmt.Errorf("%s %q: want host:port", AddressAnnotation, e.Address)
	}
	if !sha256Hex.MatchString(e.CertSHA256) {
		return fmt.Errorf("%s %q: want 64 lowercase hex digits (SHA-256)", CertSHA256Annotation, e.CertSHA256)
	}
	return nil
}

// EndpointFromNode reads a Node's upload annotations; the error names the
// Node and says the agent has not published (or published garbage).
func EndpointFromNode(node *corev1.Node) (Endpoint, error) {
	e := Endpoint{Address: node.Annotations[AddressAnnotation], CertSHA256: node.Annotations[CertSHA256Annotation]}
	if e.Address == "" && e.CertSHA256 == "" {
		return Endpoint{}, fmt.Errorf("Node %s: no upload endpoint (annotations %s and %s): is converge-node cdi-importer running there with its upload server?",
			node.Name, AddressAnnotation, CertSHA256Annotation)
	}
	if err := e.Validate(); err != nil {
		return Endpoint{}, fmt.Errorf("Node %s: %w", node.Name, err)
	}
	return e, nil
}

// Publish records e on the Node nodeName with a JSON merge patch of the
// two annotations, leaving every other annotation alone (the agent needs
// patch on nodes). Errors name the Node.
func Publish(ctx context.Context, c client.Client, nodeName string, e Endpoint) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("Node %s: publishing upload endpoint: %w", nodeName, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		AddressAnnotation: e.Address, CertSHA256Annotation: e.CertSHA256}}})
	if err != nil {
		return err
	}
	node := &corev1.Node{}
	node.Name = nodeName
	if err := c.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("Node %s: publishing upload endpoint: %w", nodeName, err)
	}
	return nil
}

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
