package vmdisks_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/vm/vmdisks"
)

// requireTool skips (or fails with CONVERGE_REQUIRE_NODEPLANE=1) when bin
// is not installed.
func requireTool(t testing.TB, bin, pkg string) {
	t.Helper()
	_, err := exec.LookPath(bin)
	vmtest.Require(t, err == nil, "%s not found: apt-get install -y --no-install-recommends %s", bin, pkg)
}

// objects is an in-memory Secret or ConfigMap store (an
// ObjectGetter); the API-backed one is tested in api_test.go.
type objects map[string]map[string][]byte

func (o objects) get(_ context.Context, namespace, name string) (map[string][]byte, error) {
	if d, ok := o[namespace+"/"+name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%s/%s: %w", namespace, name, vmdisks.ErrNotFound)
}

// newDisks gives Disks on a fresh state directory with secrets and
// configMaps as getters.
func newDisks(t testing.TB, secrets, configMaps objects) (*vmdisks.Disks, string) {
	t.Helper()
	state := t.TempDir()
	o := vmdisks.DefaultOptions(state)
	o.Secrets, o.ConfigMaps = secrets.get, configMaps.get
	d, err := vmdisks.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return d, state
}

// vmiWith gives a VMI ns/name with the volumes (one disk each).
func vmiWith(name string, vols ...kubevirtv1.Volume) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name, vmi.UID = "ns", name, types.UID("uid-"+name)
	vmi.Spec.Volumes = vols
	for _, v := range vols {
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: v.Name})
	}
	return vmi
}

func volume(name string, src kubevirtv1.VolumeSource) kubevirtv1.Volume {
	return kubevirtv1.Volume{Name: name, VolumeSource: src}
}

// readISO opens an ISO with go-diskfs and gives its label and the files
// at paths.
func readISO(t *testing.T, path string, paths ...string) (string, map[string]string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size()%2048 != 0 {
		t.Errorf("%s: %d bytes, not whole 2048-byte blocks", path, st.Size())
	}
	b, err := file.OpenFromPath(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fs, err := iso9660.Read(b, st.Size(), 0, 2048)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for _, p := range paths {
		data, err := fs.ReadFile(strings.TrimPrefix(p, "/")) // io/fs paths
		if err != nil {
			t.Errorf("%s: %s: %v", path, p, err)
			continue
		}
		out[p] = string(data)
	}
	return strings.TrimRight(fs.Label(), " \x00"), out
}

// listISO gives the names in an ISO directory (Rock Ridge names).
func listISO(t *testing.T, path, dir string) []string {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := file.OpenFromPath(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fs, err := iso9660.Read(b, st.Size(), 0, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if dir = strings.Trim(dir, "/"); dir == "" {
		dir = "." // io/fs paths
	}
	entries, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// blkid gives blkid's TYPE and LABEL of path: what cloud-init's NoCloud
// and ConfigDrive detection reads.
func blkid(t *testing.T, path string) (typ, label string) {
	t.Helper()
	requireTool(t, "blkid", "util-linux")
	out, err := exec.Command("blkid", "-p", "-o", "export", path).Output()
	if err != nil {
		t.Fatalf("blkid %s: %v", path, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "TYPE="); ok {
			typ = v
		}
		if v, ok := strings.CutPrefix(l, "LABEL="); ok {
			label = v
		}
	}
	return typ, label
}

func sha256File(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// testRegistry is go-containerregistry's in-process registry on loopback,
// counting the requests it serves, optionally behind basic auth.
type testRegistry struct {
	srv        *httptest.Server
	host       string
	user, pass string
	mu         sync.Mutex
	counts     map[string]int // "GET manifests", "GET blobs", "HEAD manifests", …
	blobGate   chan struct{}  // when set, blob GETs wait until it is closed
}

// gateBlobs makes blob GETs wait until the returned func is called (at
// the latest at t's cleanup, before the server closes).
func (r *testRegistry) gateBlobs(t testing.TB) (release func()) {
	gate := make(chan struct{})
	r.mu.Lock()
	r.blobGate = gate
	r.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release
}

func startRegistry(t testing.TB, user, pass string) *testRegistry {
	t.Helper()
	r := &testRegistry{user: user, pass: pass, counts: map[string]int{}}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != r.user || p != r.pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		kind := "other"
		switch {
		case strings.Contains(req.URL.Path, "/manifests/"):
			kind = "manifests"
		case strings.Contains(req.URL.Path, "/blobs/"):
			kind = "blobs"
		}
		r.mu.Lock()
		r.counts[req.Method+" "+kind]++
		gate := r.blobGate
		r.mu.Unlock()
		if gate != nil && kind == "blobs" && req.Method == http.MethodGet {
			<-gate
		}
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// count gives how many requests of key ("GET blobs") were served.
func (r *testRegistry) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[key]
}

func (r *testRegistry) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = map[string]int{}
}

// push writes an image of files (path in the image → content) to
// repo:tag and gives its digest.
func (r *testRegistry) push(t testing.TB, repoTag string, files map[string][]byte) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"disk/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range sortedNames(files) {
		data := files[p]
		if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o444, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
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
	base, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers"}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	auth := authn.Anonymous
	if r.user != "" {
		auth = &authn.Basic{Username: r.user, Password: r.pass}
	}
	if err := remote.Write(ref, img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// dockerConfigJSON is a kubernetes.io/dockerconfigjson Secret's data for
// host with user and pass.
func dockerConfigJSON(host, user, pass string) map[string][]byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return map[string][]byte{".dockerconfigjson": []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth))}
}

// qcow2Disk makes a small qcow2 image holding a known pattern and gives
// its bytes.
func qcow2Disk(t testing.TB, pattern byte) []byte {
	t.Helper()
	requireTool(t, "qemu-img", "qemu-utils")
	requireTool(t, "qemu-io", "qemu-utils")
	p := filepath.Join(t.TempDir(), "d.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", p, "4M")
	run(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("write -P 0x%02x 0 64k", pattern), p)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run(t testing.TB, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// treeFiles lists every file and directory under dir, relative.
func treeFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// xorrisoFiles extracts an ISO with xorriso (libisofs, an independent
// reader of Rock Ridge names) and gives every file by its path in the
// image; ok is false when xorriso is not installed (it is optional).
func xorrisoFiles(t *testing.T, iso string) (files map[string]string, ok bool) {
	t.Helper()
	if _, err := exec.LookPath("xorriso"); err != nil {
		return nil, false
	}
	dir := filepath.Join(t.TempDir(), "x")
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/", dir).CombinedOutput(); err != nil {
		t.Fatalf("xorriso -extract %s: %v\n%s", iso, err, out)
	}
	files = map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files["/"+rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, true
}

func sortedNames(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
