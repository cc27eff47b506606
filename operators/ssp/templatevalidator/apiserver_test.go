package templatevalidator_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	tv "github.com/converge-dev/converge/operators/ssp/templatevalidator"
)

// template gives a Template openshift/name with the validations rules.
func template(name, rules string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"objects": []any{}}}
	u.SetGroupVersionKind(tv.TemplateGVK)
	u.SetNamespace("openshift")
	u.SetName(name)
	u.SetAnnotations(map[string]string{"validations": rules})
	return u
}

// vmFrom gives a VirtualMachine vms/name created from Template
// openshift/tmpl (labels), with annotations and template spec spec.
func vmFrom(t *testing.T, name, tmpl string, annotations map[string]string, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(vmDoc("", spec))); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace("vms")
	u.SetName(name)
	if tmpl != "" {
		u.SetLabels(map[string]string{tv.TemplateNameKey: tmpl, tv.TemplateNamespaceKey: "openshift"})
	}
	u.SetAnnotations(annotations)
	return u
}

// warnings records the API server's warnings.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.got
	w.got = nil
	return got
}

// TestThroughAPIServer registers the webhook as converge-controller does
// (a Registrar on a manager, Templates read with mgr.GetAPIReader()) with
// a real kube-apiserver and checks what it then admits, refuses and warns
// about: before the Template API exists (templated VMs admitted, a VM's
// own rules applied) and after (the Template's rules), and the deletion
// of a common template a VM validates against (refused with SSP's
// message until the VM goes).
func TestThroughAPIServer(t *testing.T) {
	controlplane.RequireForTest(t)
	env, c, scheme := controlplane.StartEnvForTest(t)
	crdtest.Install(t, c, "virtualmachines")
	ctx := context.Background()
	for _, ns := range []string{"converge-system", "openshift", "vms"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret: types.NamespacedName{Namespace: "converge-system", Name: "converge-webhook-cert"}, Hosts: []string{"127.0.0.1"},
		Targets: tv.Webhook(tv.Options{}).Targets(), Resync: time.Second,
	})
	port := controlplane.FreePort(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}})})
	if err != nil {
		t.Fatal(err)
	}
	ro := webhook.DefaultRegisterOptions()
	ro.FieldOwner, ro.CRDPoll, ro.Retry = "converge-test", 100*time.Millisecond, 200*time.Millisecond
	reg, err := webhook.NewRegistrar(mgr, webhook.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}, certs, ro)
	if err != nil {
		t.Fatal(err)
	}
	// the lines of cmd/converge-controller/main.go
	if err := reg.Register(tv.Webhook(tv.Options{Templates: mgr.GetAPIReader(), VMs: mgr.GetAPIReader()})); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })

	denied := fmt.Sprintf("admission webhook %q denied the request: ", tv.VirtualMachineWebhookName)
	const coresRule = `[{"name":"cores","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"At most 2 cores","max":2}]`
	own := map[string]string{tv.VMValidationsAnnotation: coresRule}
	start := time.Now()
	controlplane.Eventually(t, 30*time.Second, func() bool { // registered, caBundle injected
		err := c.Create(ctx, vmFrom(t, "probe", "", own, cpu4), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), denied)
	})
	t.Logf("webhook called by the API server %s after the manager started", time.Since(start).Round(time.Millisecond))

	// No Template API yet.
	if err := c.Create(ctx, vmFrom(t, "early", "rhel9", nil, mem1Gi)); err != nil {
		t.Errorf("templated VM without a Template API refused: %v", err)
	}
	err = c.Create(ctx, vmFrom(t, "own", "", own, cpu4))
	want := denied + "At most 2 cores: value 4 is higher than maximum [2]"
	if err == nil || err.Error() != want {
		t.Errorf("VM breaking its own rule: %v\nwant %s", err, want)
	}

	// The Template API and Templates.
	crdtest.InstallTemplateAPI(t, c)
	for _, tmpl := range []*unstructured.Unstructured{
		template("rhel9", memRule("")),
		template("advice", memRule(`,"justWarning":true`)),
		template("broken", `[{"name":"m","path":".spec.domain.cpu.cores","rule":"integer","message":"m"}]`),
	} {
		if err := c.Create(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
	}
	memWant := denied + "This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]"
	start = time.Now()
	controlplane.Eventually(t, 30*time.Second, func() bool { // the manager's REST mapper learns the new API
		err := c.Create(ctx, vmFrom(t, "small", "rhel9", nil, mem1Gi), client.DryRunAll)
		return err != nil && err.Error() == memWant
	})
	t.Logf("Template rules applied %s after the Template CRD was established", time.Since(start).Round(time.Millisecond))

	var w warnings
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = &w
	wc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, c2 := range []struct {
		name     string
		do       func() error
		want     string // the error; "": admitted
		code     int32
		warnings []string
	}{
		{"VM breaking the template's rule refused with SSP's message", func() error {
			return wc.Create(ctx, vmFrom(t, "small", "rhel9", nil, mem1Gi))
		}, memWant, http.StatusUnprocessableEntity, nil},
		{"VM within the rules admitted", func() error { return wc.Create(ctx, vmFrom(t, "big", "rhel9", nil, mem4Gi)) }, "", 0, nil},
		{"update breaking the rule refused", func() error {
			u := vmFrom(t, "big", "rhel9", nil, mem1Gi)
			return wc.Patch(ctx, u, client.RawPatch(types.MergePatchType,
				[]byte(`{"spec":{"template":{"spec":{"domain":{"resources":{"requests":{"memory":"1Gi"}}}}}}}`)))
		}, memWant, http.StatusUnprocessableEntity, nil},
		{"justWarning rule: admitted with a warning", func() error { return wc.Create(ctx, vmFrom(t, "advised", "advice", nil, mem1Gi)) }, "", 0,
			[]string{"This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]"}},
		{"VM's own rules replace the template's", func() error {
			return wc.Create(ctx, vmFrom(t, "own-rules", "rhel9", map[string]string{tv.VMValidationsAnnotation: coresRule}, mem1Gi))
		}, "", 0, nil},
		{"skip-validations", func() error {
			return wc.Create(ctx, vmFrom(t, "skipped", "rhel9", map[string]string{tv.SkipValidationsAnnotation: "true"}, mem1Gi))
		}, "", 0, nil},
		{"missing template admitted", func() error { return wc.Create(ctx, vmFrom(t, "orphan", "gone", nil, mem1Gi)) }, "", 0, nil},
		{"malformed template rules refuse with a clear error", func() error { return wc.Create(ctx, vmFrom(t, "b", "broken", nil, mem4Gi)) },
			denied + `VirtualMachine vms/b: the validation rules of Template openshift/broken: rule 0 "m": path: invalid JSONPath ".spec.domain.cpu.cores": want "jsonpath::" followed by a path such as .spec.domain.cpu.cores`,
			http.StatusBadRequest, nil},
	} {
		t.Run(c2.name, func(t *testing.T) {
			w.take()
			err := c2.do()
			switch {
			case c2.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c2.want != "" && (err == nil || err.Error() != c2.want):
				t.Fatalf("error %v\nwant %s", err, c2.want)
			}
			if c2.code != 0 {
				var status apierrors.APIStatus
				if !errors.As(err, &status) || status.Status().Code != c2.code {
					t.Errorf("status of %v: want code %d", err, c2.code)
				} else if c2.code == http.StatusUnprocessableEntity && (status.Status().Reason != metav1.StatusReasonInvalid ||
					len(status.Status().Details.Causes) != 1 || status.Status().Details.Causes[0].Field != ".spec.domain.resources.requests.memory") {
					t.Errorf("status %+v: want reason Invalid and the rule's cause", status.Status())
				}
			}
			if got := w.take(); fmt.Sprint(got) != fmt.Sprint(c2.warnings) {
				t.Errorf("warnings %q, want %q", got, c2.warnings)
			}
		})
	}

	// Deleting a common template (labelled base, with rules) a VM
	// validates against is refused, as SSP's template-admission hook.
	common := template("common-old", memRule(""))
	common.SetLabels(map[string]string{"template.kubevirt.io/type": "base"})
	if err := c.Create(ctx, common); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, vmFrom(t, "uses-old", "common-old", nil, mem4Gi)); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, vmFrom(t, "own-old", "common-old", map[string]string{tv.VMValidationsAnnotation: coresRule}, mem4Gi)); err != nil {
		t.Fatal(err)
	}
	err = c.Delete(ctx, common)
	wantDel := fmt.Sprintf("admission webhook %q denied the request: Template cannot be deleted, because the following VMs are referencing it for validation: vms/uses-old", tv.TemplateWebhookName)
	var status apierrors.APIStatus
	if err == nil || err.Error() != wantDel || !errors.As(err, &status) || status.Status().Code != http.StatusForbidden {
		t.Errorf("deleting a common template in use: %v\nwant %s (403)", err, wantDel)
	}
	// A template that is not a common one is deleted whatever uses it.
	if err := c.Delete(ctx, template("rhel9", "")); err != nil {
		t.Errorf("deleting Template rhel9 (not labelled base) used by VM big: %v", err)
	}
	if err := c.Delete(ctx, vmFrom(t, "uses-old", "", nil, mem4Gi)); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { // the VM gone (no finalizers): the template may go
		return c.Delete(ctx, template("common-old", "")) == nil
	})
}
