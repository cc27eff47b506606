package importer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRemoveStale leaves the files of a killed import run next to
// disk.img (and others that are not its) and checks that RemoveStale
// removes exactly the import's temporaries and archive directories.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "disk.img")
	for _, n := range []string{"disk.img", ".disk.img.download-1", ".disk.img.raw-2", ".disk.img.clone-3", ".other.img.download-4", "notes"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".oci-archive-5", "blobs"), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveStale(path)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{".disk.img.clone-3", ".disk.img.download-1", ".disk.img.raw-2", ".oci-archive-5"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{".other.img.download-4", "disk.img", "notes"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if removed, err := RemoveStale(filepath.Join(dir, "gone", "disk.img")); err != nil || len(removed) != 0 {
		t.Errorf("missing directory: %v, %v; want nothing, no error", removed, err)
	}
}
