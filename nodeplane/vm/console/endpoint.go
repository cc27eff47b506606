package console

import (
	"net"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/nodeendpoint"
)

const (
	// AddressAnnotation on a Node is the host:port its agent serves
	// consoles on.
	AddressAnnotation = "vm.converge.dev/console-address"
	// CertSHA256Annotation on a Node is the lowercase hex SHA-256 of the
	// DER bytes of the agent's console serving certificate; clients accept
	// only that certificate.
	CertSHA256Annotation = "vm.converge.dev/console-cert-sha256"
)

// Service is the console's node endpoint: published as AddressAnnotation
// and CertSHA256Annotation by `converge-node vm`.
var Service = nodeendpoint.Service{
	Name:                 "console",
	Agent:                "converge-node vm",
	Serves:               "VMI consoles",
	AddressAnnotation:    AddressAnnotation,
	CertSHA256Annotation: CertSHA256Annotation,
}

// Endpoint is where a node's agent serves consoles and the fingerprint of
// its certificate (nodeendpoint.Endpoint).
type Endpoint = nodeendpoint.Endpoint

// EndpointFromNode reads a Node's console annotations; the error names the
// Node and says the agent has not published (or published garbage)
// (nodeendpoint.Service.FromNode).
func EndpointFromNode(node *corev1.Node) (Endpoint, error) { return Service.FromNode(node) }

// AdvertiseAddress gives the address to publish for a listener bound to
// bound: advertise when set; else the bound host when it is a specific
// address; else the Node's first InternalIP, then ExternalIP, with the
// bound port (nodeendpoint.Service.AdvertiseAddress).
func AdvertiseAddress(advertise string, bound net.Addr, node *corev1.Node) (string, error) {
	return Service.AdvertiseAddress(advertise, bound, node)
}
