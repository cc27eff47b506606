package guestimage_test

import (
	"archive/tar"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/converge-dev/converge/internal/testing/guestimage"
)

// fakeDisk writes a small file standing for disk.qcow2 and gives its path
// and body.
func fakeDisk(t *testing.T) (string, []byte) {
	t.Helper()
	body := bytes.Repeat([]byte("QFI\xfb disk "), 1000)
	path := filepath.Join(t.TempDir(), guestimage.DiskQCOW2)
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, body
}

// tarEntry is one entry of a layer.
type tarEntry struct {
	hdr  *tar.Header
	body []byte
}

func layerEntries(t *testing.T, rc io.ReadCloser) map[string]tarEntry {
	t.Helper()
	defer rc.Close()
	out := map[string]tarEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = tarEntry{h, b}
	}
}

// TestContainerDisk: one layer, /disk/disk.qcow2 with the disk's bytes,
// mode 0440, owned by 107:107 (KubeVirt's containerDisk layout), a
// linux/amd64 config, and the same digest twice.
func TestContainerDisk(t *testing.T) {
	path, body := fakeDisk(t)
	img, err := guestimage.ContainerDisk(path)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	entries := layerEntries(t, rc)
	f, ok := entries["disk/disk.qcow2"]
	if !ok {
		t.Fatalf("layer entries %v, no disk/disk.qcow2", entries)
	}
	if !bytes.Equal(f.body, body) {
		t.Errorf("disk/disk.qcow2: %d bytes, want the disk's %d", len(f.body), len(body))
	}
	if f.hdr.Mode != 0o440 || f.hdr.Uid != 107 || f.hdr.Gid != 107 || f.hdr.Typeflag != tar.TypeReg {
		t.Errorf("disk/disk.qcow2: mode %o owner %d:%d type %c, want a regular file of mode 440 owned by 107:107", f.hdr.Mode, f.hdr.Uid, f.hdr.Gid, f.hdr.Typeflag)
	}
	if d, ok := entries["disk/"]; !ok || d.hdr.Typeflag != tar.TypeDir {
		t.Errorf("no directory entry disk/ in %v", entries)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("config platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	again, err := guestimage.ContainerDisk(path)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two images of the same disk: digests %s and %s", d1, d2)
	}
}

// TestRegistry: an image pushed to the in-process registry is pulled
// back by tag with the same digest and layer, and the pull counted a
// manifest request.
func TestRegistry(t *testing.T) {
	path, body := fakeDisk(t)
	img, err := guestimage.ContainerDisk(path)
	if err != nil {
		t.Fatal(err)
	}
	r := guestimage.StartRegistry(t, "127.0.0.1:0")
	ref, digest, err := r.Push("converge/guest", "disk", img)
	if err != nil {
		t.Fatal(err)
	}
	if want := r.Addr + "/converge/guest:disk"; ref != want {
		t.Errorf("reference %q, want %q", ref, want)
	}
	before := r.Manifests.Load()
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(tag)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	if got, _ := pulled.Digest(); got != digest {
		t.Errorf("pulled digest %s, pushed %s", got, digest)
	}
	if r.Manifests.Load() == before {
		t.Error("the pull made no manifest request")
	}
	layers, err := pulled.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("pulled layers %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	if got := layerEntries(t, rc)["disk/disk.qcow2"].body; !bytes.Equal(got, body) {
		t.Errorf("pulled disk: %d bytes, want %d", len(got), len(body))
	}
}

// TestTLSRegistry: a TLS registry serves a certificate its CAPEM
// verifies: an image pushed to it is pulled back over HTTPS by a client
// trusting CAPEM, and a client trusting only the system roots is refused
// at the TLS handshake.
func TestTLSRegistry(t *testing.T) {
	path, _ := fakeDisk(t)
	img, err := guestimage.ContainerDisk(path)
	if err != nil {
		t.Fatal(err)
	}
	r := guestimage.StartTLSRegistry(t, "127.0.0.1:0")
	if len(r.CAPEM) == 0 {
		t.Fatal("a TLS registry without CAPEM")
	}
	ref, digest, err := r.Push("converge/guest", "disk", img)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref) // no name.Insecure: HTTPS only
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(r.CAPEM) {
		t.Fatalf("CAPEM holds no certificate: %q", r.CAPEM)
	}
	trusting := remote.DefaultTransport.(*http.Transport).Clone()
	trusting.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	pulled, err := remote.Image(tag, remote.WithTransport(trusting))
	if err != nil {
		t.Fatalf("pulling %s trusting CAPEM: %v", ref, err)
	}
	if got, _ := pulled.Digest(); got != digest {
		t.Errorf("pulled digest %s, pushed %s", got, digest)
	}
	_, err = remote.Image(tag)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("pulling without CAPEM: %v, want x509.UnknownAuthorityError", err)
	}
}

// TestFileServer: the files named are served whole and by range, and
// counted; any other path is 404.
func TestFileServer(t *testing.T) {
	dir := t.TempDir()
	for n, body := range map[string]string{guestimage.DiskImage: "0123456789", "secret": "no"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := guestimage.ServeFiles(t, "127.0.0.1:0", dir, guestimage.DiskImage)
	get := func(url, rng string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tt := range []struct {
		url, rng string
		code     int
		body     string
	}{
		{s.FileURL(guestimage.DiskImage), "", http.StatusOK, "0123456789"},
		{s.FileURL(guestimage.DiskImage), "bytes=2-4", http.StatusPartialContent, "234"},
		{s.FileURL("secret"), "", http.StatusNotFound, ""},
		{s.URL + "/", "", http.StatusNotFound, ""},
	} {
		code, body := get(tt.url, tt.rng)
		if code != tt.code || (tt.body != "" && body != tt.body) {
			t.Errorf("GET %s (Range %q): %d %q, want %d %q", tt.url, tt.rng, code, body, tt.code, tt.body)
		}
	}
	if n := s.Requests(guestimage.DiskImage); n != 2 {
		t.Errorf("requests for %s: %d, want 2", guestimage.DiskImage, n)
	}
}

// TestNoCloudISO reads the ISO back with go-diskfs: ISO 9660 labelled
// cidata, /user-data and /meta-data with their bodies under their Rock
// Ridge names.
func TestNoCloudISO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nocloud.iso")
	const ud, md = "#cloud-config\nruncmd:\n  - echo MARKER\n", "instance-id: i-1\nlocal-hostname: vm1\n"
	if err := guestimage.NoCloudISO(path, ud, md); err != nil {
		t.Fatal(err)
	}
	d, err := diskfs.Open(path, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fs, err := d.GetFilesystem(0)
	if err != nil {
		t.Fatal(err)
	}
	if fs.Type() != filesystem.TypeISO9660 {
		t.Errorf("file system type %v, want ISO 9660", fs.Type())
	}
	if l := strings.TrimRight(fs.Label(), " \x00"); l != guestimage.NoCloudLabel {
		t.Errorf("label %q, want %q", l, guestimage.NoCloudLabel)
	}
	for n, want := range map[string]string{"/user-data": ud, "/meta-data": md} {
		f, err := fs.OpenFile(n, os.O_RDONLY)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		b, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("%s: %q, want %q", n, b, want)
		}
	}
}
