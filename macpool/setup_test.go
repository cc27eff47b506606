package macpool_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/controlplane"
	"github.com/converge-dev/converge/macpool"
	"github.com/converge-dev/converge/webhookcert"
)

// cluster is a real API server with a permissive kubevirt.io/v1
// VirtualMachine CRD and a webhookcert Manager whose serving certificate
// the pool's webhook serves and whose CA it injects into
// converge-macpool.
type cluster struct {
	env    *controlplane.Env
	c      client.Client
	scheme *runtime.Scheme
	certs  *webhookcert.Manager
}

const poolNS = "converge-system"

func startCluster(t testing.TB) *cluster {
	t.Helper()
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") != "" {
			t.Fatal("kube-apiserver and etcd are not in bin/: run `make controlplane`")
		}
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	env, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	installVMCRD(t, ctx, c)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: poolNS}}); err != nil {
		t.Fatal(err)
	}
	certs, err := webhookcert.New(c, webhookcert.Options{
		Secret:  types.NamespacedName{Namespace: poolNS, Name: "converge-macpool-cert"},
		Hosts:   []string{"127.0.0.1"},
		Targets: []webhookcert.Target{{Kind: webhookcert.MutatingWebhook, Name: macpool.ConfigurationName}},
		Resync:  time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = certs.Start(ctx) }()
	select {
	case <-certs.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("no serving certificate")
	}
	return &cluster{env: env, c: c, scheme: scheme, certs: certs}
}

// installVMCRD creates a VirtualMachine CRD that keeps every field (the
// virt component installs the real one).
func installVMCRD(t testing.TB, ctx context.Context, c client.Client) {
	t.Helper()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "virtualmachines.kubevirt.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kubevirt.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "virtualmachines", Singular: "virtualmachine", Kind: "VirtualMachine", ListKind: "VirtualMachineList", ShortNames: []string{"vm"}},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// instance is one running MAC pool: its own informer cache, Controller
// and webhook server, registered with the API server.
type instance struct {
	ctl    *macpool.Controller
	cancel context.CancelFunc
}

// startPool starts a pool instance on a fresh port, points
// converge-macpool at it and waits until the API server calls it.
func (cl *cluster) startPool(t testing.TB, o macpool.Options) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ca, err := cache.New(cl.env.Config, cache.Options{Scheme: cl.scheme})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(ctx) }()
	ctl, err := macpool.New(cl.c, ca, o)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- ctl.Start(ctx) }()
	port := controlplane.FreePort(t)
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = cl.certs.GetCertificate }}})
	macpool.Register(srv, ctl)
	go func() { _ = srv.Start(ctx) }()
	select {
	case <-ctl.Ready():
	case err := <-errc:
		t.Fatalf("the pool stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the pool did not become ready")
	}
	ep := macpool.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}
	if err := macpool.Apply(ctx, cl.c, ep, cl.certs.CABundle(), "converge-test"); err != nil {
		t.Fatal(err)
	}
	// The API server picks the configuration up after a moment: a dry run
	// gets its MAC rewritten in KubeVirt's form once it calls this
	// instance (a user MAC outside the range: a full pool still answers).
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm := newVM("default", "probe", nic("default", "0A-00-00-00-00-01"))
		if err := cl.c.Create(ctx, vm, client.DryRunAll); err != nil {
			return false
		}
		url := ""
		mwc := &unstructured.Unstructured{}
		mwc.SetAPIVersion("admissionregistration.k8s.io/v1")
		mwc.SetKind("MutatingWebhookConfiguration")
		if err := cl.c.Get(ctx, client.ObjectKey{Name: macpool.ConfigurationName}, mwc); err == nil {
			hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
			url, _, _ = unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "url")
		}
		return macsOf(t, vm)[0] == "0a:00:00:00:00:01" && strings.HasPrefix(url, ep.URL)
	})
	return &instance{ctl: ctl, cancel: cancel}
}

type nicSpec struct{ name, mac string }

func nic(name, mac string) nicSpec { return nicSpec{name, mac} }

// newVM gives a VirtualMachine with the given NICs (mac "" for none).
func newVM(ns, name string, nics ...nicSpec) *unstructured.Unstructured {
	var list []any
	for _, n := range nics {
		m := map[string]any{"name": n.name, "bridge": map[string]any{}}
		if n.mac != "" {
			m["macAddress"] = n.mac
		}
		list = append(list, m)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"running": false, "template": map[string]any{"spec": map[string]any{
			"domain": map[string]any{"devices": map[string]any{"interfaces": list}},
		}}},
	}}
	return u
}

// macsOf gives the macAddress of each NIC of vm ("" for none).
func macsOf(t testing.TB, vm *unstructured.Unstructured) []string {
	t.Helper()
	list, _, err := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "domain", "devices", "interfaces")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range list {
		s, _ := x.(map[string]any)["macAddress"].(string)
		out = append(out, s)
	}
	return out
}

// reservations gives the data keys of the reservations ConfigMap.
func (cl *cluster) reservations(t testing.TB, name string) map[string]string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: poolNS, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data
}
