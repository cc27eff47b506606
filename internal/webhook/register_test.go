package webhook_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
)

const registrarNS = "registrar-test"

// TestRegistrar runs the registration path on a controller-runtime
// manager against a real API server, one webhook configuration per case.
// Each configuration is served at once and registered only once what it
// waits for holds (its CRDs, its Ready, permission to write it); it is
// then applied with the certificate's CA bundle (none for an externally
// managed certificate), logged as "<What> <Name> registered" with its
// LogValues, called by the API server, and kept trusting the CA: the
// certificate Manager re-injects the bundle into the configuration and
// into the CRD conversion webhooks it declares.
func TestRegistrar(t *testing.T) {
	env, c, _ := controlplane.StartEnvForTest(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: registrarNS}}); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name string
		// mutating registers a MutatingWebhookConfiguration (else a
		// validating one) on CREATE of ConfigMaps.
		mutating bool
		// external leaves the certificate to someone else: the Registrar
		// gets no certificate Manager.
		external bool
		// conversion declares a CRD conversion webhook served beside the
		// hook.
		conversion bool
		// crd is waited for, and created once the test saw the
		// registration wait.
		crd bool
		// gated waits for Ready, released once the test saw the
		// registration wait.
		gated bool
		// forbidden runs the manager as a user that may not write webhook
		// configurations until the test saw the registration fail.
		forbidden bool
	}{
		{name: "validating with a conversion webhook", conversion: true},
		{name: "mutating after Ready", mutating: true, gated: true},
		{name: "after its CRD", crd: true},
		{name: "retried after a failure", forbidden: true},
		{name: "externally managed certificate", external: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("registrar-test-%d", i)
			hookName := fmt.Sprintf("hook%d.registrar.test", i)
			secret := types.NamespacedName{Namespace: registrarNS, Name: name}
			certs, err := webhook.New(c, webhook.Options{Secret: secret, Hosts: []string{"127.0.0.1"}, Resync: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			serving, managed := certs, certs
			if tc.external {
				secret.Name += "-external" // say, cert-manager's
				serving = webhooktest.Start(t, c, webhook.Options{Secret: secret, Hosts: []string{"127.0.0.1"}})
				managed = nil
			}
			port := controlplane.FreePort(t)
			ep := webhook.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}

			cfg := webhook.Configuration{Name: name, What: "the test webhook", LogName: "registrar-test"}
			if tc.mutating {
				cfg.Mutating = []webhook.MutatingHook{{Name: hookName, Path: "/hook", Version: "v1", Resource: "configmaps",
					MatchPolicy: admissionregistrationv1.Equivalent}}
			} else {
				cfg.Validating = []webhook.ValidatingHook{{Name: hookName, Path: "/hook", Version: "v1", Resource: "configmaps",
					MatchPolicy: admissionregistrationv1.Equivalent}}
			}
			hook := denyHook(name)
			if tc.mutating {
				hook = labelHook(name)
			}
			cfg.Handlers = []webhook.Handler{{Path: "/hook", Handler: &ctrlwebhook.Admission{Handler: hook}}}
			var conversionCRD string
			if tc.conversion {
				conversionCRD = createCRD(t, c, fmt.Sprintf("gadgets%d", i), ep.ClientConfig("/convert"))
				cfg.Conversions = []string{conversionCRD}
				cfg.Handlers = append(cfg.Handlers, webhook.Handler{Path: "/convert", Handler: http.NotFoundHandler()})
			}
			waitedCRD := fmt.Sprintf("widgets%d.registrar.test", i)
			if tc.crd {
				cfg.CRDs = []string{waitedCRD}
			}
			gate := make(chan struct{})
			if tc.gated {
				cfg.Ready = func(ctx context.Context) error {
					select {
					case <-gate:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				cfg.LogValues = func() []any { return []any{"case", i} }
			}
			restCfg := env.Config
			if tc.forbidden {
				u, err := env.AddUser(envtest.User{Name: name}, env.Config)
				if err != nil {
					t.Fatal(err)
				}
				restCfg = u.Config()
			}

			var logs safebuffer.Buffer
			mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
				Scheme:  c.Scheme(),
				Metrics: metricsserver.Options{BindAddress: "0"},
				Logger:  zap.New(zap.WriteTo(&logs)),
				WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port,
					TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = serving.GetCertificate }}}),
			})
			if err != nil {
				t.Fatal(err)
			}
			reg, err := webhook.NewRegistrar(mgr, ep, managed, webhook.RegisterOptions{
				FieldOwner: "converge-test", CRDPoll: 100 * time.Millisecond, Retry: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if err := reg.Register(cfg); err != nil {
				t.Fatal(err)
			}
			runManager(t, mgr, &logs)
			t.Cleanup(func() { deleteConfiguration(t, c, cfg) }) // before the server stops: failurePolicy Fail

			// Served at once, whatever the registration waits for.
			controlplane.Eventually(t, 20*time.Second, func() bool { return serves(ep, "/hook") })

			what := "the test webhook " + name
			if tc.forbidden {
				controlplane.Eventually(t, 20*time.Second, func() bool {
					l, ok := logLine(logs.String(), "registering "+what+"; retrying")
					return ok && strings.Contains(l["error"].(string), "forbidden") && l["after"] != nil
				})
				grantWebhookConfigurations(t, c, name)
			}
			if tc.crd {
				notRegistered(t, c, cfg, "before its CRD")
				createCRD(t, c, fmt.Sprintf("widgets%d", i), apiextensionsv1.WebhookClientConfig{})
			}
			if tc.gated {
				notRegistered(t, c, cfg, "before Ready")
				close(gate)
			}

			var registered map[string]any
			controlplane.Eventually(t, 30*time.Second, func() bool {
				var ok bool
				registered, ok = logLine(logs.String(), what+" registered")
				return ok
			})
			if registered["logger"] != "registrar-test" {
				t.Errorf("registered by logger %v, want registrar-test", registered["logger"])
			}
			if tc.gated && registered["case"] != float64(i) {
				t.Errorf("the registered line lacks the LogValues: %v", registered)
			}

			bundles := caBundles(t, c, cfg)
			if len(bundles) != 1 {
				t.Fatalf("%d webhooks, want 1", len(bundles))
			}
			if tc.external {
				if len(bundles[0]) != 0 {
					t.Errorf("applied with a caBundle although the certificate is managed elsewhere")
				}
				return
			}
			if string(bundles[0]) != string(certs.CABundle()) {
				t.Errorf("applied with caBundle %q, want the certificate Manager's", bundles[0])
			}
			// The API server trusts the server through that bundle.
			controlplane.Eventually(t, 30*time.Second, func() bool {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: registrarNS, Name: "deny-" + name}}
				err := c.Create(ctx, cm, client.DryRunAll)
				if tc.mutating {
					return err == nil && cm.Labels["registrar-test"] == name
				}
				return err != nil && strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request: %s refuses deny-%s", hookName, name, name))
			})
			// The certificate Manager targets the configuration (and its
			// conversion CRDs): a changed caBundle is injected again.
			clobberCABundle(t, c, cfg)
			controlplane.Eventually(t, 20*time.Second, func() bool {
				b := caBundles(t, c, cfg)
				return len(b) == 1 && string(b[0]) == string(certs.CABundle())
			})
			if tc.conversion {
				controlplane.Eventually(t, 20*time.Second, func() bool {
					crd := &apiextensionsv1.CustomResourceDefinition{}
					return c.Get(ctx, client.ObjectKey{Name: conversionCRD}, crd) == nil &&
						string(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) == string(certs.CABundle())
				})
			}
		})
	}
}

// TestRegistrarReadyError: an error from Ready (e.g. the engine's CRD
// generation failing) stops the manager with that error, without
// registering.
func TestRegistrarReadyError(t *testing.T) {
	env, c, _ := controlplane.StartEnvForTest(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: c.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: controlplane.FreePort(t),
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = noCertificate }}})})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := webhook.NewRegistrar(mgr, webhook.Endpoint{URL: "https://127.0.0.1:1"}, nil, webhook.RegisterOptions{FieldOwner: "converge-test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := webhook.Configuration{Name: "registrar-ready-error",
		Validating: []webhook.ValidatingHook{{Name: "hook.registrar.test", Path: "/hook", Version: "v1", Resource: "configmaps"}},
		Handlers:   []webhook.Handler{{Path: "/hook", Handler: &ctrlwebhook.Admission{Handler: denyHook("x")}}},
		Ready:      func(context.Context) error { return errors.New("no CRDs") },
	}
	if err := reg.Register(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err == nil || !strings.Contains(err.Error(), "no CRDs") {
		t.Errorf("manager stopped with %v, want Ready's error", err)
	}
	if exists(t, c, cfg) {
		t.Error("registered although Ready failed")
	}
}

// TestNewRegistrarRejects: an endpoint with neither Service nor URL, or
// no field owner, fails at once.
func TestNewRegistrarRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		ep   webhook.Endpoint
		o    webhook.RegisterOptions
	}{
		{"no endpoint", webhook.Endpoint{}, webhook.RegisterOptions{FieldOwner: "x"}},
		{"no field owner", webhook.Endpoint{URL: "https://127.0.0.1:1"}, webhook.DefaultRegisterOptions()},
	} {
		if _, err := webhook.NewRegistrar(nil, tc.ep, nil, tc.o); err == nil {
			t.Errorf("%s: NewRegistrar succeeded", tc.name)
		}
	}
}

// denyHook refuses ConfigMaps named deny-*, naming itself.
func denyHook(name string) admission.Handler {
	return admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		if strings.HasPrefix(req.Name, "deny-") {
			return admission.Denied(fmt.Sprintf("%s refuses %s", name, req.Name))
		}
		return admission.Allowed("")
	})
}

// labelHook labels ConfigMaps named deny-* registrar-test=<name>.
func labelHook(name string) admission.Handler {
	return admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		if !strings.HasPrefix(req.Name, "deny-") {
			return admission.Allowed("")
		}
		cm := map[string]any{}
		if err := json.Unmarshal(req.Object.Raw, &cm); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		_ = unstructured.SetNestedField(cm, name, "metadata", "labels", "registrar-test")
		b, _ := json.Marshal(cm)
		return admission.PatchResponseFromRaw(req.Object.Raw, b)
	})
}

// runManager starts mgr until t's cleanup, which waits for it to stop and
// fails t when it returned an error; a failed t gets the log's tail.
func runManager(t *testing.T, mgr ctrl.Manager, logs *safebuffer.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", logs.String())
		}
	})
}

// createCRD creates the namespaced CRD <plural>.registrar.test, converted
// by the webhook at cc when cc is set, and gives its name.
func createCRD(t *testing.T, c client.Client, plural string, cc apiextensionsv1.WebhookClientConfig) string {
	t.Helper()
	kind := strings.ToUpper(plural[:1]) + plural[1:]
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".registrar.test"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "registrar.test", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			}},
		},
	}
	if cc.URL != nil || cc.Service != nil {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: &cc, ConversionReviewVersions: []string{"v1"}}}
	}
	if err := c.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	return crd.Name
}

// serves reports whether the webhook server answers path with anything
// but 404 (it serves the handler).
func serves(ep webhook.Endpoint, path string) bool {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only whether it serves
	resp, err := hc.Post(ep.URL+path, "application/json", strings.NewReader("{}"))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusNotFound
}

// logLine gives the first JSON log line whose msg is msg.
func logLine(logs, msg string) (map[string]any, bool) {
	for l := range strings.Lines(logs) {
		line := map[string]any{}
		if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == msg {
			return line, true
		}
	}
	return nil, false
}

// object gives an empty object of cfg's kind named cfg.Name.
func object(cfg webhook.Configuration) client.Object {
	if cfg.Kind() == webhook.MutatingWebhook {
		return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: cfg.Name}}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: cfg.Name}}
}

// notRegistered fails t when cfg's configuration appears within a second.
func notRegistered(t *testing.T, c client.Client, cfg webhook.Configuration, when string) {
	t.Helper()
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		if exists(t, c, cfg) {
			t.Fatal("registered " + when)
		}
	}
}

func exists(t *testing.T, c client.Client, cfg webhook.Configuration) bool {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Name: cfg.Name}, object(cfg))
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func deleteConfiguration(t *testing.T, c client.Client, cfg webhook.Configuration) {
	t.Helper()
	if err := c.Delete(context.Background(), object(cfg)); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

// caBundles gives the caBundle of each webhook of cfg's configuration.
func caBundles(t *testing.T, c client.Client, cfg webhook.Configuration) [][]byte {
	t.Helper()
	o := object(cfg)
	if err := c.Get(context.Background(), client.ObjectKey{Name: cfg.Name}, o); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	switch o := o.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	return out
}

// clobberCABundle sets the first webhook's caBundle to a CA nobody serves
// with, as another field manager.
func clobberCABundle(t *testing.T, c client.Client, cfg webhook.Configuration) {
	t.Helper()
	other, _, err := cert.GenerateSelfSignedCertKey("someone-else", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cc := acv1.WebhookClientConfig().WithCABundle(other...)
	var ac runtime.ApplyConfiguration
	if cfg.Kind() == webhook.MutatingWebhook {
		ac = acv1.MutatingWebhookConfiguration(cfg.Name).WithWebhooks(acv1.MutatingWebhook().WithName(cfg.Mutating[0].Name).WithClientConfig(cc))
	} else {
		ac = acv1.ValidatingWebhookConfiguration(cfg.Name).WithWebhooks(acv1.ValidatingWebhook().WithName(cfg.Validating[0].Name).WithClientConfig(cc))
	}
	if err := c.Apply(context.Background(), ac, client.FieldOwner("someone-else"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if b := caBundles(t, c, cfg); string(b[0]) == string(other) {
		return
	}
	t.Fatal("the caBundle was not replaced")
}

// grantWebhookConfigurations lets user write webhook configurations.
func grantWebhookConfigurations(t *testing.T, c client.Client, user string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"admissionregistration.k8s.io"},
		Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"},
		Verbs:     []string{"get", "list", "watch", "create", "update", "patch"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// noCertificate serves no certificate (the server starts; nothing
// connects).
func noCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return nil, errors.New("no certificate")
}
