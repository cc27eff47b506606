package macpool_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/network/macpool"
)

// cluster is a real API server with a permissive kubevirt.io/v1
// VirtualMachine CRD and a certificate Manager whose serving certificate
// the pool's webhook serves and whose CA it injects into
// converge-macpool.
type cluster struct {
	env    *controlplane.Env
	c      client.Client
	scheme *runtime.Scheme
	certs  *webhook.Manager
}

const poolNS = "converge-system"

func startCluster(t testing.TB) *cluster {
	t.Helper()
	controlplane.RequireForTest(t)
	env, c, scheme := controlplane.StartEnvForTest(t)
	crdtest.InstallPermissive(t, c, "virtualmachines", "VirtualMachine") // keeps every field: the pool must see what it is given
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: poolNS}}); err != nil {
		t.Fatal(err)
	}
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret:  types.NamespacedName{Namespace: poolNS, Name: "converge-macpool-cert"},
		Hosts:   []string{"127.0.0.1"},
		Targets: macpool.Webhook(nil).Targets(),
		Resync:  time.Second,
	})
	return &cluster{env: env, c: c, scheme: scheme, certs: certs}
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
	w := macpool.Webhook(ctl)
	ep := webhooktest.Serve(t, ctx, cl.certs, w)
	select {
	case <-ctl.Ready():
	case err := <-errc:
		t.Fatalf("the pool stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the pool did not become ready")
	}
	if err := w.Apply(ctx, cl.c, ep, cl.certs.CABundle(), "converge-test"); err != nil {
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
