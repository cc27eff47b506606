package reconciler_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/converge-dev/converge/internal/controlplane"
)

// env is the real kube-apiserver + etcd every test in this package uses.
var env *controlplane.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	env, err = controlplane.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	return m.Run()
}
