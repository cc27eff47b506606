package endpoint

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/api/nodeendpoint"
)

// AdvertiseAddress gives the address to publish for s's listener bound to
// bound (host:port, as net.Listener.Addr gives it): advertise when set
// (it must be host:port); else the bound host when it is a specific
// address; else the Node's first InternalIP, then ExternalIP, with the
// bound port. The error names the Node when it has neither.
func AdvertiseAddress(s nodeendpoint.Service, advertise string, bound net.Addr, node *corev1.Node) (string, error) {
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			return "", fmt.Errorf("%s advertise address %q: want host:port", s.Name, advertise)
		}
		return advertise, nil
	}
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "", fmt.Errorf("%s listener address %q: %w", s.Name, bound, err)
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
	return "", fmt.Errorf("Node %s: no InternalIP or ExternalIP in status.addresses to advertise the %s on: set the advertise address", node.Name, s.Name)
}
