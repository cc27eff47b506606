package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// Endpoint is where a node's agent serves consoles and the fingerprint of
// its certificate.
type Endpoint struct {
	// Address is host:port.
	Address string
	// CertSHA256 is the pinned certificate's fingerprint (Fingerprint).
	CertSHA256 string
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate reports an error naming the bad field when e is not a host:port
// and a 64-digit lowercase hex fingerprint.
func (e Endpoint) Validate() error {
	if _, _, err := net.SplitHostPort(e.Address); err != nil || e.Address == "" {
		return fmt.Errorf("%s %q: want host:port", AddressAnnotation, e.Address)
	}
	if !sha256Hex.MatchString(e.CertSHA256) {
		return fmt.Errorf("%s %q: want 64 lowercase hex digits (SHA-256)", CertSHA256Annotation, e.CertSHA256)
	}
	return nil
}

// EndpointFromNode reads a Node's console annotations; the error names the
// Node and says the agent has not published (or published garbage).
func EndpointFromNode(node *corev1.Node) (Endpoint, error) {
	e := Endpoint{Address: node.Annotations[AddressAnnotation], CertSHA256: node.Annotations[CertSHA256Annotation]}
	if e.Address == "" && e.CertSHA256 == "" {
		return Endpoint{}, fmt.Errorf("Node %s: no console endpoint (annotations %s and %s): is converge-node vm running there with its console server?",
			node.Name, AddressAnnotation, CertSHA256Annotation)
	}
	if err := e.Validate(); err != nil {
		return Endpoint{}, fmt.Errorf("Node %s: %w", node.Name, err)
	}
	return e, nil
}

// Publish records e on the Node nodeName as AddressAnnotation and
// CertSHA256Annotation with a JSON merge patch, leaving every other
// annotation alone. The agent needs patch on nodes. Errors name the Node.
func Publish(ctx context.Context, c client.Client, nodeName string, e Endpoint) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("Node %s: publishing console endpoint: %w", nodeName, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		AddressAnnotation: e.Address, CertSHA256Annotation: e.CertSHA256}}})
	if err != nil {
		return err
	}
	node := &corev1.Node{}
	node.Name = nodeName
	if err := c.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("Node %s: publishing console endpoint: %w", nodeName, err)
	}
	return nil
}

// AdvertiseAddress gives the address to publish for a listener bound to
// bound (host:port, as net.Listener.Addr gives it): advertise when set;
// else the bound host when it is a specific address; else the Node's
// first InternalIP, then ExternalIP, with the bound port. The error names
// the Node when it has neither.
func AdvertiseAddress(advertise string, bound net.Addr, node *corev1.Node) (string, error) {
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			return "", fmt.Errorf("console advertise address %q: want host:port", advertise)
		}
		return advertise, nil
	}
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "", fmt.Errorf("console listener address %q: %w", bound, err)
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return bound.String(), nil
	}
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return net.JoinHostPort(a.Address, port), nil
			}
		}
	}
	return "", fmt.Errorf("Node %s: no InternalIP or ExternalIP in status.addresses to advertise the console on: set the advertise address", node.Name)
}
