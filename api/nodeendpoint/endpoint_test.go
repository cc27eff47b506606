package nodeendpoint_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/api/nodeendpoint"
)

var svc = nodeendpoint.Service{Name: "demo", Agent: "converge-node demo", Serves: "demos",
	AddressAnnotation: "demo.example/address", CertSHA256Annotation: "demo.example/cert-sha256"}

// TestFromNodeNamesTheService checks that the messages come from the
// Service's fields, not from one user's words.
func TestFromNodeNamesTheService(t *testing.T) {
	sum := strings.Repeat("cd", 32)
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		err         string
	}{
		{"published", map[string]string{svc.AddressAnnotation: "[fd00::1]:9000", svc.CertSHA256Annotation: sum}, ""},
		{"not published", nil, "Node n1: no demo endpoint (annotations demo.example/address and demo.example/cert-sha256): is converge-node demo running there with its demo server?"},
		{"address only", map[string]string{svc.AddressAnnotation: "10.0.0.5:9000"}, `Node n1: demo.example/cert-sha256 "": want 64 lowercase hex digits (SHA-256)`},
		{"upper-case sum", map[string]string{svc.AddressAnnotation: "10.0.0.5:9000", svc.CertSHA256Annotation: strings.ToUpper(sum)}, `Node n1: demo.example/cert-sha256 "CDCD`},
		{"no port", map[string]string{svc.AddressAnnotation: "10.0.0.5", svc.CertSHA256Annotation: sum}, `Node n1: demo.example/address "10.0.0.5": want host:port`},
	} {
		ep, err := svc.FromNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: tt.annotations}})
		if (err == nil) != (tt.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.err)) {
			t.Errorf("%s: FromNode error %v, want %q", tt.name, err, tt.err)
		}
		if err == nil && (ep.Address != "[fd00::1]:9000" || ep.CertSHA256 != sum) {
			t.Errorf("%s: FromNode = %+v", tt.name, ep)
		}
	}
}

// TestServicesFromNode reads the console's and the upload server's
// endpoints from their annotations.
func TestServicesFromNode(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, tt := range []struct {
		name        string
		svc         nodeendpoint.Service
		annotations map[string]string
		err         string
	}{
		{"console published", nodeendpoint.Console, map[string]string{nodeendpoint.ConsoleAddressAnnotation: "10.0.0.5:8186", nodeendpoint.ConsoleCertSHA256Annotation: sum}, ""},
		{"console not published", nodeendpoint.Console, nil, "Node n1: no console endpoint (annotations vm.converge.dev/console-address and vm.converge.dev/console-cert-sha256): is converge-node vm running there with its console server?"},
		{"console no port", nodeendpoint.Console, map[string]string{nodeendpoint.ConsoleAddressAnnotation: "10.0.0.5", nodeendpoint.ConsoleCertSHA256Annotation: sum}, `Node n1: vm.converge.dev/console-address "10.0.0.5": want host:port`},
		{"console short sum", nodeendpoint.Console, map[string]string{nodeendpoint.ConsoleAddressAnnotation: "10.0.0.5:8186", nodeendpoint.ConsoleCertSHA256Annotation: "abcd"}, `Node n1: vm.converge.dev/console-cert-sha256 "abcd": want 64 lowercase hex digits`},
		{"upload published", nodeendpoint.Upload, map[string]string{nodeendpoint.UploadAddressAnnotation: "10.0.0.5:8186", nodeendpoint.UploadCertSHA256Annotation: sum}, ""},
		{"upload not published", nodeendpoint.Upload, map[string]string{nodeendpoint.ConsoleAddressAnnotation: "10.0.0.5:8186", nodeendpoint.ConsoleCertSHA256Annotation: sum},
			"Node n1: no upload endpoint (annotations cdi.converge.dev/upload-address and cdi.converge.dev/upload-cert-sha256): is converge-node cdi-importer running there with its upload server?"},
	} {
		ep, err := tt.svc.FromNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: tt.annotations}})
		if (err == nil) != (tt.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.err)) {
			t.Errorf("%s: FromNode error %v, want %q", tt.name, err, tt.err)
		}
		if err == nil && (ep.Address != "10.0.0.5:8186" || ep.CertSHA256 != sum) {
			t.Errorf("%s: FromNode = %+v", tt.name, ep)
		}
	}
	if got := nodeendpoint.ConsolePath("vms", "testvm"); got != "/v1/namespaces/vms/virtualmachineinstances/testvm/console" {
		t.Errorf("ConsolePath = %q", got)
	}
}
