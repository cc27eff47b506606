package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cavaliergopher/cpio"
)

// TestCloudInitSyslinux: the cloud-init disk boots as disk.img does, with
// converge.cloudinit=run instead of =1.
func TestCloudInitSyslinux(t *testing.T) {
	cfg := string(cloudInitSyslinux())
	if !strings.Contains(cfg, "converge.cloudinit=run") || strings.Contains(cfg, "converge.cloudinit=1") {
		t.Errorf("cloud-init syslinux.cfg:\n%s\nwant converge.cloudinit=run and no converge.cloudinit=1", cfg)
	}
	if strings.Replace(cfg, "=run", "=1", 1) != string(syslinuxConfig) {
		t.Errorf("the cloud-init syslinux.cfg differs from syslinux.cfg beyond the cloud-init argument")
	}
}

// TestTreeArchive: every directory, file (mode kept) and symlink of the
// tree is in the archive, sorted, and nothing else.
func TestTreeArchive(t *testing.T) {
	root := t.TempDir()
	for p, body := range map[string]string{"usr/bin/cloud-init": "#!/usr/bin/python3\n", "etc/cloud/cloud.cfg.d/90-converge.cfg": cloudInitConfig} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("python3.11", filepath.Join(root, "usr/bin/python3")); err != nil {
		t.Fatal(err)
	}
	b, err := treeArchive(root)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r := cpio.NewReader(zr)
	got := map[string]string{}
	var names []string
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r)
		switch h.Mode & cpio.ModeType {
		case cpio.TypeDir:
			got[h.Name] = "dir"
		case cpio.TypeSymlink:
			got[h.Name] = "-> " + h.Linkname
		default:
			got[h.Name] = string(body)
			if h.Mode.Perm() != 0o755 {
				t.Errorf("%s: mode %v, want 0755", h.Name, h.Mode.Perm())
			}
		}
		names = append(names, h.Name)
	}
	want := map[string]string{"etc": "dir", "etc/cloud": "dir", "etc/cloud/cloud.cfg.d": "dir", "etc/cloud/cloud.cfg.d/90-converge.cfg": cloudInitConfig,
		"usr": "dir", "usr/bin": "dir", "usr/bin/cloud-init": "#!/usr/bin/python3\n", "usr/bin/python3": "-> python3.11"}
	if len(got) != len(want) {
		t.Errorf("archive holds %v, want %v", names, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("entries not sorted: %v", names)
	}
}
