package virtapi

import (
	"os"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestKubeVirtAPIVersion: the version the server reports is the
// kubevirt.io/api that go.mod requires.
func TestKubeVirtAPIVersion(t *testing.T) {
	b, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == "kubevirt.io/api" {
			if r.Mod.Version != KubeVirtAPIVersion {
				t.Fatalf("go.mod requires kubevirt.io/api %s, KubeVirtAPIVersion is %s", r.Mod.Version, KubeVirtAPIVersion)
			}
			return
		}
	}
	t.Fatal("go.mod does not require kubevirt.io/api")
}
