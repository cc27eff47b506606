package importer

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"io/fs"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// diskImage gives a one-layer image holding files (path in the image →
// content; a path ending in / is a directory), laid out as a
// containerDisk (KubeVirt's user guide: the disk under /disk/, mode 0440,
// owned by 107:107, as internal/testing/guestimage.ContainerDisk, which
// this package's tests cannot import: it imports the importer) when the
// path is disk/<name>.
func diskImage(t *testing.T, files map[string][]byte) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		b := files[p]
		h := &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o440, Uid: 107, Gid: 107, Size: int64(len(b))}
		if strings.HasSuffix(p, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o555
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// push writes img to the registry at host as repo:tag over plain HTTP.
func push(t *testing.T, host, repoTag string, img v1.Image, opts ...remote.Option) {
	t.Helper()
	ref, err := name.ParseReference(host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// TestImportRegistry pulls containerDisk images from an OCI registry
// served in the test process (go-containerregistry's pkg/registry) and
// checks the bytes of the raw image written, and each refusal's reason.
func TestImportRegistry(t *testing.T) {
	f := makeFixtures(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	push(t, host, "disks/fedora:40", diskImage(t, map[string][]byte{"disk/": nil, "disk/disk.qcow2": f.qcow2}))
	push(t, host, "disks/raw:1", diskImage(t, map[string][]byte{"disk/disk.img": f.raw}))
	push(t, host, "disks/two:1", diskImage(t, map[string][]byte{"disk/a.img": f.raw, "disk/b.img": f.raw}))
	push(t, host, "disks/none:1", diskImage(t, map[string][]byte{"data/disk.img": f.raw}))
	push(t, host, "disks/page:1", diskImage(t, map[string][]byte{"disk/disk.img": []byte("<!DOCTYPE html><html>login</html>")}))

	opts := DefaultOptions()
	opts.Retries, opts.Backoff = 1, time.Millisecond
	for _, tc := range []struct {
		name, url string
		want      []byte
		format    string
	}{
		{"qcow2 containerDisk", "docker://" + host + "/disks/fedora:40", f.raw, "qcow2"},
		{"raw disk", "docker://" + host + "/disks/raw:1", f.raw, "raw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "disk.img")
			var reports []Progress
			o := opts
			o.Progress = func(p Progress) { reports = append(reports, p) }
			res, err := ImportRegistry(context.Background(), RegistrySource{URL: tc.url}, Target{Path: dst, SizeBytes: 16 * mib}, o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, padded(tc.want, 16*mib)) {
				t.Errorf("%s: %d bytes differ from the image's raw disk grown to 16 MiB", dst, len(got))
			}
			if res.Format != tc.format || res.VirtualSize != int64(len(tc.want)) || res.SizeBytes != 16*mib {
				t.Errorf("result %+v, want format %s, virtual size %d", res, tc.format, len(tc.want))
			}
			checkProgress(t, reports, tc.format != "raw")
			left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".*"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}

	failures := []struct {
		name, url string
		src       RegistrySource
		reason    Reason
		msg       string
	}{
		{"unknown tag", "docker://" + host + "/disks/fedora:41", RegistrySource{}, ReasonNotFound, "MANIFEST_UNKNOWN"},
		{"two disks", "docker://" + host + "/disks/two:1", RegistrySource{}, ReasonNotAnImage, "more than one entry under /disk/ (/disk/a.img, /disk/b.img)"},
		{"no disk", "docker://" + host + "/disks/none:1", RegistrySource{}, ReasonNotAnImage, "no file under /disk/ in the image"},
		{"an HTML page as disk", "docker://" + host + "/disks/page:1", RegistrySource{}, ReasonNotAnImage, "text/html"},
		{"http scheme", "https://" + host + "/disks/raw:1", RegistrySource{}, ReasonInvalidInput, `scheme "https" is not docker or oci-archive`},
		{"plain HTTP to a registry not loopback nor insecure", "docker://10.255.255.1:5000/disks/raw:1", RegistrySource{}, ReasonUnreachable, "registries other than loopback ones are reached over HTTPS only"},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "disk.img")
			src := tc.src
			src.URL = tc.url
			o := opts
			o.Retries, o.Timeout = 0, 5*time.Second
			_, err := ImportRegistry(context.Background(), src, Target{Path: dst, SizeBytes: 16 * mib}, o)
			if ReasonOf(err) != tc.reason || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.url) {
				t.Fatalf("error %v (reason %q), want reason %s naming the URL and containing %q", err, ReasonOf(err), tc.reason, tc.msg)
			}
			if _, serr := os.Stat(dst); !os.IsNotExist(serr) {
				t.Errorf("%s exists after a failed import", dst)
			}
		})
	}
}

// TestImportRegistryAuth: the secretRef's accessKeyId and secretKey are
// the registry's basic auth; without them a 401 is HTTPError, not
// retried.
func TestImportRegistryAuth(t *testing.T) {
	f := makeFixtures(t)
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var asked int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		if u, p, ok := r.BasicAuth(); !ok || u != "importer" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ref, _ := name.ParseReference(host+"/private/disk:1", name.Insecure)
	if err := remote.Write(ref, diskImage(t, map[string][]byte{"disk/disk.img": f.raw}), remote.WithAuth(&authn.Basic{Username: "importer", Password: "s3cret"})); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Retries, opts.Backoff = 2, time.Millisecond
	url := "docker://" + host + "/private/disk:1"
	dst := filepath.Join(t.TempDir(), "disk.img")
	asked = 0
	_, err := ImportRegistry(context.Background(), RegistrySource{URL: url}, Target{Path: dst, SizeBytes: 8 * mib}, opts)
	if ReasonOf(err) != ReasonHTTPError || IsRetryable(err) || !strings.Contains(err.Error(), "secretRef") {
		t.Fatalf("anonymous pull: %v, want HTTPError, not retryable, pointing at secretRef", err)
	}
	_, err = ImportRegistry(context.Background(), RegistrySource{URL: url, Username: "importer", Password: "s3cret"}, Target{Path: dst, SizeBytes: 8 * mib}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, padded(f.raw, 8*mib)) {
		t.Errorf("%s differs from the image's disk", dst)
	}
}

// TestImportRegistryTLS: a registry whose certificate the system does
// not trust is refused (TLS verification, not retried), reached with the
// certConfigMap's CA, or without verification when the CDI CR lists it
// in insecureRegistries. The registry is named example.com (the name
// httptest's certificate holds) and dialled at the test server.
func TestImportRegistryTLS(t *testing.T) {
	f := makeFixtures(t)
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	// example.com:443 is dialled at the test server, whose certificate
	// names example.com.
	base := srv.Client().Transport.(*http.Transport).Clone()
	base.TLSClientConfig.RootCAs = nil // the system roots, which do not hold httptest's CA
	addr := srv.Listener.Addr().String()
	base.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	pushT := srv.Client().Transport.(*http.Transport).Clone()
	pushT.DialContext = base.DialContext
	ref, _ := name.ParseReference("example.com/tls/disk:1")
	if err := remote.Write(ref, diskImage(t, map[string][]byte{"disk/disk.img": f.raw}), remote.WithTransport(pushT)); err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := "docker://example.com/tls/disk:1"
	opts := DefaultOptions()
	opts.Retries = 0
	for _, tc := range []struct {
		name   string
		src    RegistrySource
		reason Reason
	}{
		{"system roots", RegistrySource{}, ReasonUnreachable},
		{"another CA", RegistrySource{CA: selfSigned(t)}, ReasonUnreachable},
		{"certConfigMap CA", RegistrySource{CA: ca}, ""},
		{"insecureRegistries", RegistrySource{Insecure: []string{"example.com"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			src.URL, src.Transport = url, base.Clone()
			dst := filepath.Join(t.TempDir(), "disk.img")
			_, err := ImportRegistry(context.Background(), src, Target{Path: dst, SizeBytes: 8 * mib}, opts)
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := os.ReadFile(dst); !bytes.Equal(got, padded(f.raw, 8*mib)) {
					t.Errorf("%s differs from the image's disk", dst)
				}
				return
			}
			if ReasonOf(err) != tc.reason || IsRetryable(err) || !strings.Contains(err.Error(), "TLS verification failed") {
				t.Fatalf("error %v, want %s, not retryable, naming the TLS verification", err, tc.reason)
			}
		})
	}
}

// TestImportOCIArchive: oci-archive:// reads an OCI archive in the
// node's archive directory, and nothing outside it.
func TestImportOCIArchive(t *testing.T) {
	f := makeFixtures(t)
	dir := t.TempDir()
	lp, err := layout.Write(filepath.Join(t.TempDir(), "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	arm := diskImage(t, map[string][]byte{"disk/disk.img": f.qioRaw})
	if err := lp.AppendImage(arm, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64"})); err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(diskImage(t, map[string][]byte{"disk/disk.qcow2": f.qcow2}), layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		t.Fatal(err)
	}
	tarDir(t, string(lp), filepath.Join(dir, "fedora.tar"))
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "outside.tar"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Retries = 0
	imp := func(url, archiveDir, arch string) ([]byte, error) {
		dst := filepath.Join(t.TempDir(), "disk.img")
		_, err := ImportRegistry(context.Background(), RegistrySource{URL: url, ArchiveDir: archiveDir, Architecture: arch}, Target{Path: dst, SizeBytes: 8 * mib}, opts)
		if err != nil {
			return nil, err
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".*"))
		if len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
		return os.ReadFile(dst)
	}
	got, err := imp("oci-archive:///fedora.tar", dir, "")
	if err != nil || !bytes.Equal(got, padded(f.raw, 8*mib)) {
		t.Errorf("amd64 image of the archive: err %v, or the disk differs from its qcow2's raw", err)
	}
	got, err = imp("oci-archive://fedora.tar", dir, "arm64")
	if err != nil || !bytes.Equal(got, f.qioRaw) {
		t.Errorf("arm64 image of the archive: err %v, or the disk differs", err)
	}
	for _, tc := range []struct{ url, dir, reason, msg string }{
		{"oci-archive:///fedora.tar", "", string(ReasonInvalidInput), "--oci-archive-dir"},
		{"oci-archive:///missing.tar", dir, string(ReasonNotFound), "no file missing.tar"},
		{"oci-archive:///../outside.tar", dir, string(ReasonInvalidInput), "path escapes from parent"},
	} {
		if _, err := imp(tc.url, tc.dir, ""); string(ReasonOf(err)) != tc.reason || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s (dir %q): %v, want %s containing %q", tc.url, tc.dir, err, tc.reason, tc.msg)
		}
	}
}

// tarDir writes the files under dir into the tar file out.
func tarDir(t *testing.T, dir, out string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(b))}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = os.WriteFile(out, buf.Bytes(), 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}
