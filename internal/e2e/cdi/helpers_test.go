package cdi_test

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// node is the node whose agents run in the tests, ns the namespace of
// their DataVolumes.
const (
	node = "node-a"
	ns   = "vms"
)

func sha(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func keyOf(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
