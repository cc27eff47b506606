package controlplane

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// StartForTest starts a kube-apiserver and etcd from bin/ for t (stopped
// in t's cleanup) and gives a client with the client-go and
// apiextensions types. It skips t when the binaries are not built.
func StartForTest(t testing.TB) client.Client {
	t.Helper()
	_, c, _ := StartEnvForTest(t)
	return c
}

// FreePort gives a TCP port on 127.0.0.1 that was free a moment ago, for a
// server the test starts (a webhook server the API server calls back).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Eventually polls cond every 100ms until it holds, failing t when it does
// not within timeout (for state the API server reaches asynchronously).
func Eventually(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StartEnvForTest is StartForTest for tests that need the Env (its
// rest.Config for a manager or a kubeconfig) and more types: it starts a
// control plane stopped at cleanup and gives it, a client and the client's
// scheme, which knows the client-go types, apiextensions/v1 and whatever
// addToScheme adds. It skips the test when the binaries are missing.
func StartEnvForTest(t testing.TB, addToScheme ...func(*runtime.Scheme) error) (*Env, client.Client, *runtime.Scheme) {
	t.Helper()
	bin, err := BinDir()
	if err != nil || !Available(bin) {
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	env, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme}, addToScheme...) {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return env, c, scheme
}

// RequireForTest fails t when kube-apiserver or etcd is not in bin/ and
// CONVERGE_REQUIRE_NODEPLANE is set (to anything), so that CI cannot skip
// a test StartEnvForTest would skip; otherwise it does nothing. Call it
// before StartEnvForTest.
func RequireForTest(t testing.TB) {
	t.Helper()
	bin, err := BinDir()
	if (err != nil || !Available(bin)) && os.Getenv("CONVERGE_REQUIRE_NODEPLANE") != "" {
		t.Fatal("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
}

// RunManagerForTest creates a controller-runtime manager on env's API
// server with scheme (metrics server off), calls each setup on it (a
// package's Setup with its options, in order), starts it and gives the
// context it runs under. At t's cleanup the context is cancelled and the
// cleanup waits until the manager has stopped, failing t (Errorf) when
// the manager returned an error. A setup error fails t at once.
func RunManagerForTest(t testing.TB, env *Env, scheme *runtime.Scheme, setups ...func(ctrl.Manager) error) context.Context {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, setup := range setups {
		if err := setup(mgr); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return ctx
}
