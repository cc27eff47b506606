package nodeendpoint

import (
	"fmt"
	"net"
	"regexp"

	corev1 "k8s.io/api/core/v1"
)

// Endpoint is where a node's agent serves a Service and the fingerprint of
// its certificate.
type Endpoint struct {
	// Address is host:port.
	Address string
	// CertSHA256 is the pinned certificate's fingerprint (Fingerprint).
	CertSHA256 string
}

// Service names one kind of node endpoint: the annotations it is
// published as and the words its messages use. Console and Upload are
// the two there are.
type Service struct {
	// Name is the service in messages: "console" gives "console server",
	// "no console endpoint", "console serving certificate".
	Name string
	// Agent is the command that serves it, for the hint when a Node has
	// not published it, e.g. "converge-node vm".
	Agent string
	// Serves says what is served, for the agent's start log line
	// ("serving " + Serves), e.g. "VMI consoles".
	Serves string
	// AddressAnnotation is the Node annotation holding Endpoint.Address.
	AddressAnnotation string
	// CertSHA256Annotation is the Node annotation holding
	// Endpoint.CertSHA256.
	CertSHA256Annotation string
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate reports an error naming the bad annotation when e is not a
// host:port and a 64-digit lowercase hex fingerprint, e.g.
// `vm.converge.dev/console-address "10.0.0.5": want host:port`.
func (s Service) Validate(e Endpoint) error {
	if _, _, err := net.SplitHostPort(e.Address); err != nil || e.Address == "" {
		return fmt.Errorf("%s %q: want host:port", s.AddressAnnotation, e.Address)
	}
	if !sha256Hex.MatchString(e.CertSHA256) {
		return fmt.Errorf("%s %q: want 64 lowercase hex digits (SHA-256)", s.CertSHA256Annotation, e.CertSHA256)
	}
	return nil
}

// FromNode reads a Node's two annotations of s; the error names the Node
// and says the agent has not published (neither annotation is set) or
// published garbage (Validate).
func (s Service) FromNode(node *corev1.Node) (Endpoint, error) {
	e := Endpoint{Address: node.Annotations[s.AddressAnnotation], CertSHA256: node.Annotations[s.CertSHA256Annotation]}
	if e.Address == "" && e.CertSHA256 == "" {
		return Endpoint{}, fmt.Errorf("Node %s: no %s endpoint (annotations %s and %s): is %s running there with its %s server?",
			node.Name, s.Name, s.AddressAnnotation, s.CertSHA256Annotation, s.Agent, s.Name)
	}
	if err := s.Validate(e); err != nil {
		return Endpoint{}, fmt.Errorf("Node %s: %w", node.Name, err)
	}
	return e, nil
}
