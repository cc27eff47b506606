package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/converge-dev/converge/internal/cli"
	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// cliEnv starts a real kube-apiserver and etcd for a CLI test, stopped
// when t ends, and gives them with the path of an admin kubeconfig.
func cliEnv(t *testing.T) (*controlplane.Env, string) {
	t.Helper()
	env, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Stop() })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	return env, kubeconfig
}

// exampleConfig copies testdata/example into a temporary directory, which
// a test may change, and gives its path.
func exampleConfig(t *testing.T) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "config")
	if err := os.CopyFS(config, os.DirFS(filepath.Join("..", "..", "testdata", "example"))); err != nil {
		t.Fatal(err)
	}
	return config
}

// runner gives a function running converge with args against kubeconfig,
// as a user would, giving its stdout and stderr together and its exit
// code.
func runner(kubeconfig string) func(args ...string) (string, int) {
	return func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		code := cli.Run(append([]string{"--kubeconfig", kubeconfig}, args...), &out, &errb)
		return out.String() + errb.String(), code
	}
}
