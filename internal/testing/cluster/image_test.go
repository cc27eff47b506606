package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestPauseImageIsReproducible builds the pause image (Kubernetes' pause.c)
// twice from separate builds and checks that the archives are byte-identical, and that the
// image is what containerd needs: linux/GOARCH, the entrypoint, no
// creation time, one layer holding /pause (mode 0755, owner 0:0, epoch
// timestamps).
func TestPauseImageIsReproducible(t *testing.T) {
	if _, err := repoRoot(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	var archives [][]byte
	for _, n := range []string{"a.tar", "b.tar"} {
		p := filepath.Join(dir, n)
		if err := BuildPauseImage(ctx, p); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Fatal("two builds of the pause image differ")
	}
	img, err := tarball.ImageFromPath(filepath.Join(dir, "a.tar"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !slices.Equal(cf.Config.Entrypoint, []string{"/pause"}) || !cf.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("config: os %q arch %q entrypoint %v created %v; want linux/%s, [/pause], the Unix epoch", cf.OS, cf.Architecture, cf.Config.Entrypoint, cf.Created, runtime.GOARCH)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != "pause" || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(0, 0)) {
		t.Errorf("layer entry %q mode %o owner %d:%d mtime %v; want pause 755 0:0 epoch", h.Name, h.Mode, h.Uid, h.Gid, h.ModTime)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("the layer holds more than /pause (%v)", err)
	}
}
