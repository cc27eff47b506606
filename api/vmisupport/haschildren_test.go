package vmisupport

import (
	"strings"
	"testing"
)

// TestHasChildren: hasChildren (a set built once) answers as a scan of the
// table would, for every row's path, every prefix of one, and paths with
// no row.
func TestHasChildren(t *testing.T) {
	scan := func(pattern string) bool {
		for _, f := range supportTable {
			if strings.HasPrefix(f.Path, pattern+".") || strings.HasPrefix(f.Path, pattern+"[*]") {
				return true
			}
		}
		return false
	}
	patterns := []string{"", "spec.nodeSelector.x", "spec.domain.devices.disks[*].nope", "spe", "spec.domain.dev"}
	for _, f := range supportTable {
		for i := range len(f.Path) + 1 {
			patterns = append(patterns, f.Path[:i])
		}
	}
	withChildren := 0
	for _, p := range patterns {
		got, want := hasChildren(p), scan(p)
		if got != want {
			t.Errorf("hasChildren(%q) = %v, want %v", p, got, want)
		}
		if got {
			withChildren++
		}
	}
	if withChildren == 0 {
		t.Error("no pattern has children: the table is not read")
	}
}
