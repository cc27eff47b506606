package sspoperator_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/ssp/sspoperator"
	"github.com/converge-dev/converge/operators/ssp/templatevalidator"
)

const hcoNS = "kubevirt-hyperconverged"

// golden is the golden images namespace of templates that name none.
const golden = "kubevirt-os-images"

// template gives a DataImportCronTemplate named name (in namespace ns
// unless empty) keeping the DataSource dataSource fresh from url.
func template(name, ns, dataSource, url string) map[string]any {
	md := map[string]any{"name": name, "labels": map[string]any{"instancetype.kubevirt.io/default-preference": "fedora"},
		"annotations": map[string]any{"cdi.kubevirt.io/storage.bind.immediate.requested": "true"}}
	if ns != "" {
		md["namespace"] = ns
	}
	return map[string]any{"metadata": md, "spec": map[string]any{
		"managedDataSource": dataSource, "schedule": "0 */12 * * *", "garbageCollect": "Outdated", "importsToKeep": int64(2),
		"template": map[string]any{"spec": map[string]any{
			"source":  map[string]any{"registry": map[string]any{"url": url}},
			"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}}}}
}

func ssp(ns, name string, templates ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ssp.kubevirt.io/v1beta3", "kind": "SSP",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{operand.NativeAnnotation: operand.Native},
			"labels": map[string]any{"app.kubernetes.io/part-of": "hyperconverged-cluster"}},
		"spec": map[string]any{"templateValidator": map[string]any{"replicas": int64(2)},
			"commonTemplates": map[string]any{"namespace": "openshift", "dataImportCronTemplates": templates}},
	}}
}

// condition gives u's condition typ as "Status Reason: message".
func condition(u *unstructured.Unstructured, typ string) string {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range raw {
		m := x.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return ""
}

// waitCR polls the CR until ok holds, failing with its status.
func waitCR(t *testing.T, c client.Client, u *unstructured.Unstructured, what string, ok func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		err := c.Get(context.Background(), client.ObjectKeyFromObject(u), got)
		if err == nil && ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			st, _, _ := unstructured.NestedMap(got.Object, "status")
			t.Fatalf("SSP %s: %s not reached in 1m (get: %v); status %v", u.GetName(), what, err, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOperator runs the SSP operator with the template validator role on
// a real API server with kube-controller-manager's namespace controller:
//
//   - before any native SSP, the template validator is not registered;
//   - a native SSP gives the golden images namespace, its view Role and
//     RoleBinding, the edit ClusterRole, and one DataImportCron per
//     dataImportCronTemplate (in kubevirt-os-images, or the template's own
//     namespace) with the template's labels, annotations and spec and
//     SSP's app labels; the SSP reads Available with
//     the lifecycle SDK's status fields, and the template validator is
//     registered;
//   - a second native SSP is Degraded ExistingDeployment;
//   - a template removed from the SSP prunes its DataImportCron;
//   - a template without a name is refused (Degraded
//     UnsupportedConfiguration naming its path) and what runs stays;
//   - deleting the SSP removes what it derived, the template validator's
//     configuration goes, and the manager ends with operand.ErrRoleGone.
func TestOperator(t *testing.T) {
	env, _ := controlplane.StartWithControllerManagerForTest(t, "namespace-controller")
	scheme := envScheme(t)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	must(t, err)
	crdtest.Install(t, c, "ssps", "dataimportcrons", "virtualmachines")
	ctx := context.Background()
	for _, ns := range []string{hcoNS, "my-images", "other"} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret: types.NamespacedName{Namespace: hcoNS, Name: "converge-webhook-cert"}, Hosts: []string{"127.0.0.1"},
		Targets: templatevalidator.Webhook(templatevalidator.Options{}).Targets(), Resync: time.Second,
	})
	port := controlplane.FreePort(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}})})
	must(t, err)
	ro := webhook.DefaultRegisterOptions()
	ro.FieldOwner, ro.CRDPoll, ro.Retry = "converge-test", 100*time.Millisecond, 200*time.Millisecond
	reg, err := webhook.NewRegistrar(mgr, webhook.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}, certs, ro)
	must(t, err)
	engine, err := graph.NewEngine()
	must(t, err)
	oo := operand.DefaultOptions()
	oo.Images = map[string]string{"node": "registry.local/converge/converge-node:v-test"}
	oo.Version, oo.Poll, oo.WaitTimeout, oo.SkipNameValidation = "v-test", 200*time.Millisecond, 30*time.Second, true
	err = sspoperator.Setup(mgr, engine, sspoperator.Options{Operand: oo, TemplateValidator: true, Webhooks: reg})
	must(t, err)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		default:
		}
		_ = c.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: templatevalidator.ConfigurationName}})
	})
	vwcKey := client.ObjectKey{Name: templatevalidator.ConfigurationName}

	// No native SSP: the template validator waits.
	time.Sleep(2 * time.Second)
	if err := c.Get(ctx, vwcKey, &admissionregistrationv1.ValidatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Fatalf("template validator registered before any native SSP: %v", err)
	}

	// A native SSP: the golden images namespace, its RBAC, the crons.
	start := time.Now()
	cr := ssp(hcoNS, "ssp-kubevirt-hyperconverged",
		template("fedora-image-cron", "", "fedora", "docker://registry.local/fedora:latest"),
		template("my-image-cron", "my-images", "my-image", "docker://registry.local/my:latest"))
	must(t, c.Create(ctx, cr))
	got := waitCR(t, c, cr, "Available", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Available"), "True AllComponentsReady")
	})
	t.Logf("SSP Available %s after its creation", time.Since(start).Round(time.Millisecond))
	for field, want := range map[string]any{"phase": "Deployed", "operatorVersion": "v-test", "targetVersion": "v-test", "observedVersion": "v-test"} {
		if v, _, _ := unstructured.NestedFieldNoCopy(got.Object, "status", field); v != want {
			t.Errorf("status.%s = %v, want %v", field, v, want)
		}
	}
	if g, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration"); g != got.GetGeneration() {
		t.Errorf("status.observedGeneration = %d, want %d", g, got.GetGeneration())
	}
	nsObj := &corev1.Namespace{}
	must(t, c.Get(ctx, client.ObjectKey{Name: golden}, nsObj))
	for k, want := range map[string]string{"app.kubernetes.io/name": "data-sources", "app.kubernetes.io/component": "templating", "app.kubernetes.io/part-of": "hyperconverged-cluster"} {
		if v := nsObj.Labels[k]; v != want {
			t.Errorf("Namespace %s label %s = %q, want %q", golden, k, v, want)
		}
	}
	rb := &rbacv1.RoleBinding{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: golden, Name: "os-images.kubevirt.io:view"}, rb))
	if rb.RoleRef.Name != "os-images.kubevirt.io:view" || len(rb.Subjects) != 2 || rb.Subjects[0].Name != "system:authenticated" {
		t.Errorf("RoleBinding os-images.kubevirt.io:view: roleRef %v, subjects %v", rb.RoleRef, rb.Subjects)
	}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: golden, Name: "os-images.kubevirt.io:view"}, &rbacv1.Role{}))
	must(t, c.Get(ctx, client.ObjectKey{Name: "os-images.kubevirt.io:edit"}, &rbacv1.ClusterRole{}))
	for _, tc := range []struct{ ns, name, ds, url string }{
		{golden, "fedora-image-cron", "fedora", "docker://registry.local/fedora:latest"},
		{"my-images", "my-image-cron", "my-image", "docker://registry.local/my:latest"},
	} {
		dic := &cdiv1.DataImportCron{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: tc.name}, dic); err != nil {
			t.Errorf("DataImportCron %s/%s: %v", tc.ns, tc.name, err)
			continue
		}
		if dic.Spec.ManagedDataSource != tc.ds || dic.Spec.Schedule != "0 */12 * * *" || dic.Spec.ImportsToKeep == nil || *dic.Spec.ImportsToKeep != 2 ||
			dic.Spec.Template.Spec.Source == nil || dic.Spec.Template.Spec.Source.Registry == nil || *dic.Spec.Template.Spec.Source.Registry.URL != tc.url {
			t.Errorf("DataImportCron %s/%s spec %+v, want the template's", tc.ns, tc.name, dic.Spec)
		}
		if dic.Labels["instancetype.kubevirt.io/default-preference"] != "fedora" || dic.Labels["app.kubernetes.io/name"] != "data-sources" ||
			dic.Annotations["cdi.kubevirt.io/storage.bind.immediate.requested"] != "true" {
			t.Errorf("DataImportCron %s/%s labels %v annotations %v", tc.ns, tc.name, dic.Labels, dic.Annotations)
		}
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.Get(ctx, vwcKey, &admissionregistrationv1.ValidatingWebhookConfiguration{}) == nil
	})

	// A second native SSP: not deployed.
	second := ssp("other", "ssp-other")
	must(t, c.Create(ctx, second))
	waitCR(t, c, second, "Degraded ExistingDeployment", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Degraded"), "True ExistingDeployment: SSP kubevirt-hyperconverged/ssp-kubevirt-hyperconverged is deployed already")
	})
	must(t, c.Delete(ctx, second))

	// A template removed: its DataImportCron is pruned.
	must(t, c.Get(ctx, client.ObjectKeyFromObject(cr), cr))
	must(t, unstructured.SetNestedSlice(cr.Object, []any{template("fedora-image-cron", "", "fedora", "docker://registry.local/fedora:latest")},
		"spec", "commonTemplates", "dataImportCronTemplates"))
	must(t, c.Update(ctx, cr))
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: "my-images", Name: "my-image-cron"}, &cdiv1.DataImportCron{}))
	})

	// A template without a name: refused, what runs stays.
	nameless := template("x", "", "nameless", "docker://registry.local/x:latest")
	delete(nameless["metadata"].(map[string]any), "name")
	must(t, c.Get(ctx, client.ObjectKeyFromObject(cr), cr))
	must(t, unstructured.SetNestedSlice(cr.Object, []any{template("fedora-image-cron", "", "fedora", "docker://registry.local/fedora:latest"), nameless},
		"spec", "commonTemplates", "dataImportCronTemplates"))
	must(t, c.Update(ctx, cr))
	waitCR(t, c, cr, "Degraded naming the nameless template", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Degraded"), "True UnsupportedConfiguration: spec.commonTemplates.dataImportCronTemplates[1].metadata.name: required")
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: golden, Name: "fedora-image-cron"}, &cdiv1.DataImportCron{}); err != nil {
		t.Errorf("DataImportCron fedora-image-cron after a refused SSP: %v", err)
	}

	// Deletion removes what was derived; the role ends the manager.
	must(t, c.Delete(ctx, cr))
	controlplane.Eventually(t, time.Minute, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cr), cr.DeepCopy()))
	})
	for _, o := range []client.Object{
		&cdiv1.DataImportCron{ObjectMeta: metav1.ObjectMeta{Namespace: golden, Name: "fedora-image-cron"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "os-images.kubevirt.io:edit"}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s left after the SSP was deleted: %v", o, o.GetName(), err)
		}
	}
	controlplane.Eventually(t, time.Minute, func() bool {
		err := c.Get(ctx, client.ObjectKey{Name: golden}, nsObj)
		return apierrors.IsNotFound(err) || (err == nil && nsObj.DeletionTimestamp != nil)
	})
	select {
	case err := <-done:
		if !errors.Is(err, operand.ErrRoleGone) {
			t.Errorf("manager ended with %v, want ErrRoleGone", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the manager still runs after the last native SSP went")
	}
	if err := c.Get(ctx, vwcKey, &admissionregistrationv1.ValidatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("template validator configuration after the last SSP went: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
