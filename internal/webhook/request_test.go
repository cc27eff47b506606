package webhook_test

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/converge-dev/converge/internal/webhook"
)

func TestRequestName(t *testing.T) {
	for _, c := range []struct {
		name, raw, want string
	}{
		{"web", `{"metadata":{"name":"web"}}`, "web"},
		{"", `{"metadata":{"generateName":"web-"}}`, "web-*"},
		{"", `not json`, "*"},
	} {
		req := ctrladmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Name: c.name, Object: runtime.RawExtension{Raw: []byte(c.raw)}}}
		if got := webhook.RequestName(req); got != c.want {
			t.Errorf("RequestName(name %q, %s) = %q, want %q", c.name, c.raw, got, c.want)
		}
	}
}
