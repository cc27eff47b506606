package controlplane

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StartWithControllerManagerForTest starts kube-apiserver, etcd and
// kube-controller-manager with the named controllers for t (all stopped in
// t's cleanup) and gives the Env and a client with the client-go types. It
// skips t when a binary is not built, and fails it instead when
// CONVERGE_REQUIRE_NODEPLANE=1 (CI). When t fails, the controller
// manager's log tail is logged.
func StartWithControllerManagerForTest(t testing.TB, controllers ...string) (*Env, client.Client) {
	t.Helper()
	bin, err := BinDir()
	if err != nil || !Available(bin) || !ControllerManagerAvailable(bin) {
		msg := "kube-apiserver, etcd or kube-controller-manager is not in bin/: run hack/controlplane/build.sh"
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	env, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kcm, err := StartControllerManager(env, controllers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager log tail:\n%s", kcm.LogTail(4000))
		}
		kcm.Stop()
	})
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return env, c
}
