package sspoperator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/ssp/sspoperator"
)

// baseTemplate gives a base common template named name of version in
// namespace openshift, with an os label.
func baseTemplate(name, version string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "template.openshift.io/v1", "kind": "Template",
		"metadata": map[string]any{"name": name, "namespace": "openshift",
			"labels": map[string]any{"template.kubevirt.io/type": "base", "template.kubevirt.io/version": version,
				"os.template.kubevirt.io/centos7.0": "true"},
			"annotations": map[string]any{"description": name}},
		"objects":    []any{map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": map[string]any{"name": "${NAME}"}}},
		"parameters": []any{map[string]any{"name": "NAME", "generate": "expression", "from": "vm-[a-z0-9]{16}"}},
	}}
}

func templates(t *testing.T, c client.Client) map[string]unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(sspoperator.TemplateGVK.GroupVersion().WithKind("TemplateList"))
	must(t, c.List(context.Background(), list, client.InNamespace("openshift")))
	out := map[string]unstructured.Unstructured{}
	for _, u := range list.Items {
		out[u.GetName()] = u
	}
	return out
}

// TestCommonTemplates runs the SSP operator on a real API server, first
// without the Template API (plain Kubernetes), then with a CRD standing in
// for OpenShift's aggregated Template API (crdtest.InstallTemplateAPI):
//
//   - without it the SSP is Available with no templates;
//   - once it is served, the SSP's next reconcile (here a spec change)
//     derives the 90 amd64 templates of common-templates v0.35.0 into
//     spec.commonTemplates.namespace (openshift) with SSP's labels;
//   - a base template of an older version that left the bundle, applied
//     earlier by the operator's field manager (as an older converge did),
//     is kept deprecated: annotation and label
//     template.kubevirt.io/deprecated, its os label dropped;
//   - one of a newer version, created by someone else, is left as it is;
//   - deleting the SSP removes the templates it derived, the deprecated one
//     included, and leaves the newer one.
func TestCommonTemplates(t *testing.T) {
	env, _ := controlplane.StartWithControllerManagerForTest(t, "namespace-controller")
	scheme := envScheme(t)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	must(t, err)
	crdtest.Install(t, c, "ssps")
	ctx := context.Background()
	for _, ns := range []string{hcoNS, "openshift"} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	must(t, err)
	engine, err := graph.NewEngine()
	must(t, err)
	oo := operand.DefaultOptions()
	oo.Images = map[string]string{"node": "registry.local/converge/converge-node:v-test"}
	oo.Version, oo.Poll, oo.WaitTimeout, oo.SkipNameValidation = "v-test", 200*time.Millisecond, 30*time.Second, true
	must(t, sspoperator.Setup(mgr, engine, sspoperator.Options{Operand: oo}))
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Plain Kubernetes: no Template API, no templates, Available.
	cr := ssp(hcoNS, "ssp-kubevirt-hyperconverged")
	unstructured.RemoveNestedField(cr.Object, "spec", "commonTemplates", "dataImportCronTemplates")
	must(t, c.Create(ctx, cr))
	waitCR(t, c, cr, "Available", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Available"), "True AllComponentsReady") && u.GetGeneration() == observed(u)
	})

	// The Template API served, an old and a newer base template there.
	crdtest.InstallTemplateAPI(t, c)
	old, newer := baseTemplate("centos7-server-small", "v0.24.0"), baseTemplate("from-the-future", "v0.36.0")
	must(t, c.Patch(ctx, old, client.Apply, client.FieldOwner("converge-"+sspoperator.Name), client.ForceOwnership))
	must(t, c.Create(ctx, newer))
	must(t, c.Get(ctx, client.ObjectKeyFromObject(cr), cr))
	must(t, unstructured.SetNestedField(cr.Object, int64(3), "spec", "templateValidator", "replicas"))
	must(t, c.Update(ctx, cr))
	waitCR(t, c, cr, "Available at the new generation", func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(condition(u, "Available"), "True AllComponentsReady") && u.GetGeneration() == observed(u)
	})
	got := templates(t, c)
	derived := 0
	for _, u := range got {
		if u.GetLabels()["template.kubevirt.io/version"] == "v0.35.0" {
			derived++
		}
	}
	if derived != 90 {
		t.Errorf("%d templates of v0.35.0 in openshift, want the bundle's 90 amd64 ones", derived)
	}
	fedora, ok := got["fedora-server-small"]
	if !ok {
		t.Fatalf("no template fedora-server-small in openshift; found %d templates", len(got))
	}
	for k, want := range map[string]string{"app.kubernetes.io/name": "common-templates", "app.kubernetes.io/component": "templating",
		"app.kubernetes.io/part-of": "hyperconverged-cluster", "template.kubevirt.io/type": "base", "os.template.kubevirt.io/fedora43": "true"} {
		if v := fedora.GetLabels()[k]; v != want {
			t.Errorf("template fedora-server-small label %s = %q, want %q", k, v, want)
		}
	}
	if objs, _, _ := unstructured.NestedSlice(fedora.Object, "objects"); len(objs) != 1 {
		t.Errorf("template fedora-server-small has %d objects, want its VirtualMachine", len(objs))
	}
	if _, ok := got["fedora-server-small-arm64"]; ok {
		t.Error("template fedora-server-small-arm64 derived on an amd64 SSP")
	}
	dep := got["centos7-server-small"]
	if dep.GetLabels()["template.kubevirt.io/deprecated"] != "true" || dep.GetAnnotations()["template.kubevirt.io/deprecated"] != "true" {
		t.Errorf("old template not deprecated: labels %v, annotations %v", dep.GetLabels(), dep.GetAnnotations())
	}
	if _, ok := dep.GetLabels()["os.template.kubevirt.io/centos7.0"]; ok {
		t.Errorf("deprecated template keeps its os label: %v", dep.GetLabels())
	}
	if p, _, _ := unstructured.NestedSlice(dep.Object, "parameters"); len(p) != 1 {
		t.Errorf("deprecated template's parameters %v, want its own", p)
	}
	future := got["from-the-future"]
	if l := future.GetLabels(); l["template.kubevirt.io/deprecated"] != "" || l["app.kubernetes.io/name"] != "" {
		t.Errorf("newer template changed: labels %v", l)
	}

	// Deleting the SSP removes what it derived.
	must(t, c.Delete(ctx, cr))
	controlplane.Eventually(t, time.Minute, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cr), cr.DeepCopy()))
	})
	left := templates(t, c)
	if _, ok := left["from-the-future"]; len(left) != 1 || !ok {
		names := []string{}
		for n := range left {
			names = append(names, n)
		}
		t.Errorf("templates left after the SSP was deleted: %v, want only from-the-future", names)
	}
}

// observed gives u's status.observedGeneration.
func observed(u *unstructured.Unstructured) int64 {
	g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return g
}
