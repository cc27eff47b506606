// Package aggregatedtest runs one of converge-controller's aggregated APIs
// (internal/aggregated: virt-api, cdi-apiserver) in-process for tests,
// registered with a test control plane (internal/testing/controlplane,
// whose API server has the aggregation layer configured) exactly as
// converge-controller registers it: its APIService with the CA bundle of
// a certificate internal/webhook issues. The one difference is the Service:
// kube-apiserver resolves a ClusterIP Service through kube-proxy, which a
// test control plane has not, so the Service is of type ExternalName
// "localhost" (the aggregator then dials localhost at the APIService's
// port, where the server listens, and verifies the certificate for
// <service>.<namespace>.svc as it would in a cluster).
package aggregatedtest

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/aggregated"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/webhook"
)

// Namespace holds the server's Service, certificate Secret and
// ServiceAccount, as converge-controller's namespace does.
const Namespace = "converge-system"

// ServiceName is the Service the APIService names.
const ServiceName = "converge-controller"

// Start runs the API newAPI gives against env until t ends and waits until
// the API server reports its APIService Available (routing to it works).
// newAPI gets a client of the control plane's admin (its scheme knows
// client-go's types and kubevirt.io/v1) and the token of a ServiceAccount
// converge-system/converge-controller bound to cluster-admin, as
// converge-controller's own (every right). It skips t as
// controlplane.StartEnvForTest does.
func Start(t testing.TB, env *controlplane.Env, newAPI func(c client.Client, token string) aggregated.API) {
	t.Helper()
	ctx := t.Context()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}))
	token := controllerToken(t, c)
	api := newAPI(c, token)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	svc := types.NamespacedName{Namespace: Namespace, Name: ServiceName}
	must(c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}}))
	certs, err := webhook.New(c, webhook.Options{
		Secret: types.NamespacedName{Namespace: Namespace, Name: api.Component + "-cert-" + strconv.Itoa(int(port))},
		Hosts:  []string{svc.Name + "." + svc.Namespace + ".svc", "127.0.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := certs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), api.Component+"-kubeconfig")
	if err := env.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	srv, err := aggregated.New(aggregated.Options{Listener: l, Cert: certs, Kubeconfig: kubeconfig}, api)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", api.Component, err)
		}
	})
	select {
	case <-srv.Serving():
	case err := <-done:
		t.Fatalf("%s: %v", api.Component, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not serving after 30s", api.Component)
	}
	if err := aggregated.Register(ctx, c, api, svc, port, certs.CABundle(), "aggregatedtest"); err != nil {
		t.Fatal(err)
	}
	WaitAvailable(t, c, api.APIServiceName())
}

// WaitAvailable waits until the APIService name is Available, failing t
// after 60s with its last condition.
func WaitAvailable(t testing.TB, c client.Client, name string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiregistration.k8s.io/v1")
		u.SetKind("APIService")
		if err := c.Get(t.Context(), client.ObjectKey{Name: name}, u); err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, cd := range conds {
				m, _ := cd.(map[string]any)
				if m["type"] == "Available" {
					if m["status"] == "True" {
						return
					}
					last, _ = m["message"].(string)
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("APIService %s not Available after 60s: %s", name, last)
}

// controllerToken creates the ServiceAccount converge-controller, binds it
// to cluster-admin and gives a token of it.
func controllerToken(t testing.TB, c client.Client) string {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ServiceName}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "aggregatedtest-converge-controller"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: ServiceName}}}
	if err := c.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr := &authnv1.TokenRequest{}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
