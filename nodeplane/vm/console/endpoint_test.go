package console_test

import (
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/nodeplane/vm/console"
)

func TestAdvertiseAddress(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.7"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	for _, tt := range []struct {
		name, advertise, bound string
		node                   *corev1.Node
		want, err              string
	}{
		{"flag wins", "console.example:9000", "[::]:8186", node, "console.example:9000", ""},
		{"bad flag", "console.example", "[::]:8186", node, "", `console advertise address "console.example": want host:port`},
		{"specific bind", "", "127.0.0.1:8186", node, "127.0.0.1:8186", ""},
		{"InternalIP first", "", "[::]:8186", node, "10.0.0.5:8186", ""},
		{"no address", "", "0.0.0.0:8186", bare, "", "Node n2: no InternalIP or ExternalIP"},
	} {
		bound, err := net.ResolveTCPAddr("tcp", tt.bound)
		if err != nil {
			t.Fatal(err)
		}
		got, err := console.AdvertiseAddress(tt.advertise, bound, tt.node)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.err)) {
			t.Errorf("%s: AdvertiseAddress = %q, %v; want %q, %q", tt.name, got, err, tt.want, tt.err)
		}
	}
}

func TestEndpointFromNode(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		err         string
	}{
		{"published", map[string]string{console.AddressAnnotation: "10.0.0.5:8186", console.CertSHA256Annotation: sum}, ""},
		{"not published", nil, "Node n1: no console endpoint"},
		{"no port", map[string]string{console.AddressAnnotation: "10.0.0.5", console.CertSHA256Annotation: sum}, `Node n1: vm.converge.dev/console-address "10.0.0.5": want host:port`},
		{"short sum", map[string]string{console.AddressAnnotation: "10.0.0.5:8186", console.CertSHA256Annotation: "abcd"}, `Node n1: vm.converge.dev/console-cert-sha256 "abcd": want 64 lowercase hex digits`},
	} {
		ep, err := console.EndpointFromNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: tt.annotations}})
		if (err == nil) != (tt.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.err)) {
			t.Errorf("%s: EndpointFromNode error %v, want %q", tt.name, err, tt.err)
		}
		if err == nil && (ep.Address != "10.0.0.5:8186" || ep.CertSHA256 != sum) {
			t.Errorf("%s: EndpointFromNode = %+v", tt.name, ep)
		}
	}
}
