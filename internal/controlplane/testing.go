package controlplane

import (
	"net"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
