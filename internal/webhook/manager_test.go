package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/webhook"
)

// TestManagerRotatesAndInjects runs a Manager with lifetimes of seconds
// against a real API server that calls a webhook served with the
// Manager's certificate. It proves that the Secret is created, that the
// CA bundle lands in a validating and a mutating webhook configuration
// and a CRD conversion webhook, that the serving certificate is re-issued
// before it expires and the CA before it expires, that the old CA stays
// in the bundle, and that the API server keeps trusting the webhook
// across both rotations.
func TestManagerRotatesAndInjects(t *testing.T) {
	c := controlplane.StartForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	port := controlplane.FreePort(t)
	url := fmt.Sprintf("https://127.0.0.1:%d/allow", port)
	vwc, mwc, crd := webhookConfigs(url)
	for _, o := range []client.Object{vwc, mwc, crd} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	secret := types.NamespacedName{Namespace: "default", Name: "webhook-cert"}
	m, err := webhook.New(c, webhook.Options{
		Secret: secret,
		Hosts:  []string{"127.0.0.1"},
		Targets: []webhook.Target{
			{Kind: webhook.ValidatingWebhook, Name: vwc.Name},
			{Kind: webhook.MutatingWebhook, Name: mwc.Name},
			{Kind: webhook.CRDConversion, Name: crd.Name},
		},
		Lifetimes: webhook.Lifetimes{CADuration: 8 * time.Second, CARenewBefore: 4 * time.Second, ServerDuration: 4 * time.Second, ServerRenewBefore: 2 * time.Second},
		Resync:    time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = m.Start(ctx) }()
	startServer(t, ctx, port, m)
	select {
	case <-m.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the Manager did not become ready")
	}

	var first *x509.Certificate
	controlplane.Eventually(t, 10*time.Second, func() bool { // the server may still be starting
		first, err = servedCert(port, vwcBundle(t, c, vwc.Name))
		return err == nil
	})
	firstCA := secretCA(t, c, secret)
	admitThroughAPIServer(t, c, "before-rotation")

	// The serving certificate is re-issued before it expires, and the
	// bundle the API server holds verifies the new one.
	controlplane.Eventually(t, 10*time.Second, func() bool {
		second, err := servedCert(port, vwcBundle(t, c, vwc.Name))
		return err == nil && !second.Equal(first)
	})
	if !time.Now().Before(first.NotAfter) {
		t.Errorf("the serving certificate was replaced only after it expired (%s)", first.NotAfter)
	}

	// The CA is re-issued before it expires; the bundle of every target
	// holds the new and the old CA, and the API server trusts the server.
	var newCA *x509.Certificate
	controlplane.Eventually(t, 15*time.Second, func() bool {
		newCA = secretCA(t, c, secret)
		return !newCA.Equal(firstCA)
	})
	if !time.Now().Before(firstCA.NotAfter) {
		t.Errorf("the CA was replaced only after it expired (%s)", firstCA.NotAfter)
	}
	controlplane.Eventually(t, 5*time.Second, func() bool {
		for _, b := range [][]byte{vwcBundle(t, c, vwc.Name), mwcBundle(t, c, mwc.Name), crdBundle(t, c, crd.Name)} {
			if !bundleHas(t, b, newCA) || !bundleHas(t, b, firstCA) {
				return false
			}
		}
		return true
	})
	mustServedCert(t, port, vwcBundle(t, c, vwc.Name))
	admitThroughAPIServer(t, c, "after-rotation")
}

// TestManagerRejectsBadOptions: options that cannot work fail at New.
func TestManagerRejectsBadOptions(t *testing.T) {
	good := webhook.Options{Secret: types.NamespacedName{Namespace: "ns", Name: "s"}, Hosts: []string{"h"}}
	for _, c := range []struct {
		name   string
		mutate func(*webhook.Options)
	}{
		{"no Secret namespace", func(o *webhook.Options) { o.Secret.Namespace = "" }},
		{"no hosts", func(o *webhook.Options) { o.Hosts = nil }},
		{"renewBefore longer than duration", func(o *webhook.Options) {
			o.Lifetimes = webhook.DefaultLifetimes()
			o.Lifetimes.CARenewBefore = 72 * time.Hour
		}},
	} {
		o := good
		c.mutate(&o)
		if _, err := webhook.New(nil, o); err == nil {
			t.Errorf("%s: New succeeded", c.name)
		}
	}
	if _, err := webhook.New(nil, good); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

// startServer serves /allow (admits everything) with m's certificate.
func startServer(t *testing.T, ctx context.Context, port int, m *webhook.Manager) {
	t.Helper()
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{
		Host: "127.0.0.1", Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = m.GetCertificate }},
	})
	srv.Register("/allow", &ctrlwebhook.Admission{Handler: admission.HandlerFunc(
		func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })})
	go func() { _ = srv.Start(ctx) }()
}

func webhookConfigs(url string) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration, *apiextensionsv1.CustomResourceDefinition) {
	cc := admissionregistrationv1.WebhookClientConfig{URL: &url}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"webhookcert-test": "true"}}
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "webhookcert-test"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "allow.webhookcert.test", ClientConfig: cc, Rules: rules, ObjectSelector: sel,
			SideEffects: &none, FailurePolicy: &fail, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5),
		}},
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "webhookcert-test"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "allow.webhookcert.test", ClientConfig: cc, Rules: rules, ObjectSelector: sel,
			SideEffects: &none, FailurePolicy: &fail, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5),
		}},
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.webhookcert.test"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "webhookcert.test", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			}},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url},
					ConversionReviewVersions: []string{"v1"},
				},
			},
		},
	}
	return vwc, mwc, crd
}

// servedCert connects to the webhook server trusting only bundle and
// gives the certificate it serves; it fails unless the handshake verifies.
func servedCert(port int, bundle []byte) (*x509.Certificate, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("no CA bundle")
	}
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func mustServedCert(t *testing.T, port int, bundle []byte) *x509.Certificate {
	t.Helper()
	c, err := servedCert(port, bundle)
	if err != nil {
		t.Fatalf("TLS handshake with the webhook server, trusting the injected bundle: %v", err)
	}
	return c
}

// admitThroughAPIServer creates a ConfigMap that the webhooks intercept
// (failurePolicy Fail): it succeeds only if the API server trusts the
// served certificate through the injected bundle.
func admitThroughAPIServer(t *testing.T, c client.Client, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"webhookcert-test": "true"}}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatalf("creating a ConfigMap through the webhooks: %v", err)
	}
}

func vwcBundle(t *testing.T, c client.Client, name string) []byte {
	t.Helper()
	o := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, o); err != nil {
		t.Fatal(err)
	}
	return o.Webhooks[0].ClientConfig.CABundle
}

func mwcBundle(t *testing.T, c client.Client, name string) []byte {
	t.Helper()
	o := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, o); err != nil {
		t.Fatal(err)
	}
	return o.Webhooks[0].ClientConfig.CABundle
}

func crdBundle(t *testing.T, c client.Client, name string) []byte {
	t.Helper()
	o := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, o); err != nil {
		t.Fatal(err)
	}
	return o.Spec.Conversion.Webhook.ClientConfig.CABundle
}

func secretCA(t *testing.T, c client.Client, key types.NamespacedName) *x509.Certificate {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), key, s); err != nil {
		t.Fatal(err)
	}
	certs, err := cert.ParseCertsPEM(s.Data[webhook.CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func bundleHas(t *testing.T, bundle []byte, ca *x509.Certificate) bool {
	t.Helper()
	certs, err := cert.ParseCertsPEM(bundle)
	if err != nil {
		return false
	}
	for _, c := range certs {
		if bytes.Equal(c.Raw, ca.Raw) {
			return true
		}
	}
	return false
}
