// Package webhooktest runs converge's webhooks for a test whose webhook
// server a real kube-apiserver calls back: it starts an internal/webhook
// certificate Manager and serves a webhook.Configuration's handlers on
// loopback with its certificate, so that the tests of the hco-webhook, the
// VM validation webhook and the MAC pool share one way of getting a
// serving certificate, an endpoint and an injected caBundle. CheckShape
// and EndpointCases check the exact webhook configuration each applies.
package webhooktest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/webhook"
)

// Start creates a certificate Manager on c with opts, runs it until t's
// cleanup and waits up to 30 s for its first serving certificate, failing
// t when New refuses opts or no certificate comes. It gives the running
// Manager (its GetCertificate serves the webhook's TLS).
func Start(t testing.TB, c client.Client, opts webhook.Options) *webhook.Manager {
	t.Helper()
	certs, err := webhook.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = certs.Start(ctx) }()
	select {
	case <-certs.Ready():
	case <-time.After(30 * time.Second):
		t.Fatalf("webhook certificate Secret %s: no serving certificate within 30s", opts.Secret)
	}
	return certs
}

// Serve starts a controller-runtime webhook server on a free port of
// 127.0.0.1 with certs' serving certificate, serves cfg's handlers on it
// until ctx ends and gives the Endpoint the API server reaches it at (a
// URL). The configuration itself is not applied: that is the test's
// (cfg.Apply) or a Registrar's job.
func Serve(t testing.TB, ctx context.Context, certs *webhook.Manager, cfg webhook.Configuration) webhook.Endpoint {
	t.Helper()
	port := controlplane.FreePort(t)
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}})
	cfg.Serve(srv)
	go func() { _ = srv.Start(ctx) }()
	return webhook.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}
}

// CheckShape fails t unless the webhook configuration cfg applies through
// ep with caBundle is exactly want (a *ValidatingWebhookConfiguration or
// *MutatingWebhookConfiguration of admissionregistration.k8s.io/v1, with
// its TypeMeta): every field the apply sets, and no other.
func CheckShape(t testing.TB, cfg webhook.Configuration, ep webhook.Endpoint, caBundle []byte, want client.Object) {
	t.Helper()
	b, err := json.Marshal(cfg.ApplyConfiguration(ep, caBundle))
	if err != nil {
		t.Fatal(err)
	}
	got := reflect.New(reflect.TypeOf(want).Elem()).Interface()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(got); err != nil {
		t.Fatalf("%s %s: %v\n%s", cfg.Kind(), cfg.Name, err, b)
	}
	if !reflect.DeepEqual(got, want) {
		w, _ := json.MarshalIndent(want, "", "  ")
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("%s %s through %+v:\ngot  %s\nwant %s", cfg.Kind(), cfg.Name, ep, g, w)
	}
}

// EndpointCase is an Endpoint, a CA bundle and the clientConfig a hook at
// a path gets through them, for tables of webhook configuration shapes.
type EndpointCase struct {
	Name     string
	Endpoint webhook.Endpoint
	CABundle []byte
	// ClientConfig gives the clientConfig of a hook at path.
	ClientConfig func(path string) admissionregistrationv1.WebhookClientConfig
}

// EndpointCases gives the endpoints converge-controller's flags can
// give: a Service with its port, a Service on the default port 443
// (without a CA bundle: left to injection), and a base URL with a
// trailing slash.
func EndpointCases() []EndpointCase {
	svc := &types.NamespacedName{Namespace: "converge-system", Name: "converge-webhook"}
	service := func(port int32, ca []byte) func(string) admissionregistrationv1.WebhookClientConfig {
		return func(path string) admissionregistrationv1.WebhookClientConfig {
			return admissionregistrationv1.WebhookClientConfig{CABundle: ca, Service: &admissionregistrationv1.ServiceReference{
				Namespace: svc.Namespace, Name: svc.Name, Path: &path, Port: &port}}
		}
	}
	ca := []byte("-----BEGIN CERTIFICATE-----\n")
	return []EndpointCase{
		{"service port 8443 with CA", webhook.Endpoint{Service: svc, ServicePort: 8443}, ca, service(8443, ca)},
		{"service default port", webhook.Endpoint{Service: svc}, nil, service(443, nil)},
		{"URL", webhook.Endpoint{URL: "https://127.0.0.1:4343/"}, nil, func(path string) admissionregistrationv1.WebhookClientConfig {
			url := "https://127.0.0.1:4343" + path
			return admissionregistrationv1.WebhookClientConfig{URL: &url}
		}},
	}
}

// ValidatingWebhook gives the validating webhook every converge
// configuration is expected to hold for name at path through ec: CREATE and
// UPDATE of the namespaced group/version/resource, matchPolicy policy,
// failurePolicy Fail, sideEffects None, timeoutSeconds 10,
// admissionReviewVersions [v1] (HCO's CSV webhookdefinitions and virt-api's
// configuration). Written out here, not derived from internal/webhook, so
// that a change there fails the shape tests.
func (ec EndpointCase) ValidatingWebhook(name, path, group, version, resource string, policy admissionregistrationv1.MatchPolicyType) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: name, ClientConfig: ec.ClientConfig(path),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version},
				Resources: []string{resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
		}},
		MatchPolicy:             ptr.To(policy),
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](10),
		AdmissionReviewVersions: []string{"v1"},
	}
}

// Paths gives the server paths cfg serves, in its order.
func Paths(cfg webhook.Configuration) []string {
	var paths []string
	for _, h := range cfg.Handlers {
		paths = append(paths, h.Path)
	}
	return paths
}
