package reconciler_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// startEnv starts a real kube-apiserver + etcd for one test (each test
// gets a clean cluster) and stops it when the test ends.
func startEnv(t *testing.T) *rest.Config {
	t.Helper()
	env, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return env.Config
}
