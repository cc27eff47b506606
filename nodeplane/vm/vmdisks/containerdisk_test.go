package vmdisks_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/vmdisks"
)

func containerDisk(name, image string, policy corev1.PullPolicy) kubevirtv1.Volume {
	return volume(name, kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: image, ImagePullPolicy: policy}})
}

// backingOf gives an overlay's backing file and format (qemu-img info).
func backingOf(t *testing.T, overlay string) (file, format string) {
	t.Helper()
	var info struct {
		Format        string `json:"format"`
		Backing       string `json:"full-backing-filename"`
		BackingFormat string `json:"backing-filename-format"`
	}
	if err := json.Unmarshal([]byte(run(t, "qemu-img", "info", "--output=json", "-f", "qcow2", overlay)), &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" {
		t.Errorf("%s: format %s, want qcow2", overlay, info.Format)
	}
	return info.Backing, info.BackingFormat
}

// TestContainerDiskPull: a cold pull fetches the image once, caches its
// disk by digest and makes the VMI an overlay on it; a second VMI on the
// same image fetches no blob (IfNotPresent: no request at all; Always:
// the manifest only); a new digest under the same tag is pulled under
// Always and ignored under IfNotPresent; Never uses only the cache.
func TestContainerDiskPull(t *testing.T) {
	reg := startRegistry(t, "", "")
	disk1, disk2 := qcow2Disk(t, 0x11), qcow2Disk(t, 0x22)
	digest1 := reg.push(t, "kubevirt/fedora:43", map[string][]byte{"disk/disk.qcow2": disk1})
	image := reg.host + "/kubevirt/fedora:43"
	d, state := newDisks(t, objects{}, objects{})
	ctx := context.Background()
	prepare := func(name string, policy corev1.PullPolicy) (string, error) {
		t.Helper()
		vol := containerDisk("root", image, policy)
		vmi := vmiWith(name, vol)
		src, err := d.Resolve(vmi, vol)
		if err != nil {
			t.Fatal(err)
		}
		return src.Path, d.Prepare(ctx, vmi)
	}
	cacheFile := func(digest string) string {
		return filepath.Join(state, "containerdisks", strings.Replace(digest, ":", "-", 1), "disk.qcow2")
	}

	// cold
	overlay, err := prepare("cold", "")
	if err != nil {
		t.Fatal(err)
	}
	if n := reg.count("GET blobs"); n < 1 {
		t.Errorf("cold pull fetched %d blobs", n)
	}
	backing, format := backingOf(t, overlay)
	if backing != cacheFile(digest1) || format != "qcow2" {
		t.Errorf("overlay backing %s (%s), want %s (qcow2)", backing, format, cacheFile(digest1))
	}
	if sha256File(t, cacheFile(digest1)) != sha256Bytes(disk1) {
		t.Error("cached disk differs from the image's")
	}

	// cached: IfNotPresent asks nothing, Always the manifest only
	for _, tc := range []struct {
		vmi        string
		policy     corev1.PullPolicy
		wantNoReqs bool
	}{{"cached-ifnotpresent", corev1.PullIfNotPresent, true}, {"cached-always", corev1.PullAlways, false}} {
		reg.reset()
		overlay, err := prepare(tc.vmi, tc.policy)
		if err != nil {
			t.Fatal(err)
		}
		if n := reg.count("GET blobs"); n != 0 {
			t.Errorf("%s: %d blob fetches, want 0", tc.vmi, n)
		}
		if got := reg.count("GET manifests") + reg.count("HEAD manifests"); tc.wantNoReqs && got != 0 || !tc.wantNoReqs && got == 0 {
			t.Errorf("%s: %d manifest requests", tc.vmi, got)
		}
		if b, _ := backingOf(t, overlay); b != cacheFile(digest1) {
			t.Errorf("%s: backing %s", tc.vmi, b)
		}
	}

	// the tag moves to a new digest
	digest2 := reg.push(t, "kubevirt/fedora:43", map[string][]byte{"disk/disk.qcow2": disk2})
	if digest2 == digest1 {
		t.Fatal("same digest for another disk")
	}
	for _, tc := range []struct {
		vmi    string
		policy corev1.PullPolicy
		want   string
	}{
		{"moved-ifnotpresent", corev1.PullIfNotPresent, digest1},
		{"moved-never", corev1.PullNever, digest1},
		{"moved-always", corev1.PullAlways, digest2},
		{"moved-ifnotpresent-after", corev1.PullIfNotPresent, digest2}, // the reference was pulled again
	} {
		overlay, err := prepare(tc.vmi, tc.policy)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := backingOf(t, overlay); b != cacheFile(tc.want) {
			t.Errorf("%s: backing %s, want %s", tc.vmi, b, cacheFile(tc.want))
		}
	}
	if sha256File(t, cacheFile(digest2)) != sha256Bytes(disk2) {
		t.Error("cached disk of the new digest differs from the image's")
	}

	// Never without the image in the cache
	vol := containerDisk("root", reg.host+"/kubevirt/other:1", corev1.PullNever)
	err = d.Prepare(ctx, vmiWith("never", vol))
	if want := "image " + reg.host + "/kubevirt/other:1 is not on this node and its imagePullPolicy is Never"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Never on a missing image: %v, want %q", err, want)
	}
}

func sha256Bytes(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestContainerDiskOverlayKeepsCachePristine: the guest's writes (made
// here with qemu-io on the overlay) land in the overlay; the cached image
// stays byte for byte what was pulled; Release removes the overlay and
// leaves the cache.
func TestContainerDiskOverlayKeepsCachePristine(t *testing.T) {
	reg := startRegistry(t, "", "")
	disk := qcow2Disk(t, 0x33)
	digest := reg.push(t, "cd/pristine:1", map[string][]byte{"disk/disk.qcow2": disk})
	d, state := newDisks(t, objects{}, objects{})
	vol := containerDisk("root", reg.host+"/cd/pristine:1", "")
	vmi := vmiWith("writer", vol)
	if err := d.Prepare(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	src, _ := d.Resolve(vmi, vol)
	cached, _ := backingOf(t, src.Path)
	before := sha256File(t, cached)
	run(t, "qemu-io", "-f", "qcow2", "-c", "write -P 0xee 0 64k", src.Path)
	if out := run(t, "qemu-io", "-f", "qcow2", "-c", "read -P 0xee 0 64k", src.Path); !strings.Contains(out, "read 65536/65536") {
		t.Errorf("the overlay does not read back the guest's write: %s", out)
	}
	if out := run(t, "qemu-io", "-r", "-f", "qcow2", "-c", "read -P 0x33 0 64k", cached); !strings.Contains(out, "read 65536/65536") || strings.Contains(out, "Pattern verification failed") {
		t.Errorf("the cached image changed: %s", out)
	}
	if after := sha256File(t, cached); after != before {
		t.Errorf("cached image %s changed: sha256 %s -> %s", cached, before, after)
	}
	if want := filepath.Join(state, "containerdisks", strings.Replace(digest, ":", "-", 1), "disk.qcow2"); cached != want {
		t.Errorf("cached at %s, want %s", cached, want)
	}
	if err := d.Release(vmi.Namespace, vmi.Name, vmi.UID); err != nil {
		t.Fatal(err)
	}
	if left := treeFiles(t, filepath.Join(state, "vmis")); len(left) != 0 {
		t.Errorf("after Release: %v", left)
	}
	if _, err := os.Stat(cached); err != nil {
		t.Errorf("the cache went with the VMI: %v", err)
	}
}

// TestContainerDiskPullSecret: a registry behind basic auth refuses the
// pull without imagePullSecret and serves it with a
// kubernetes.io/dockerconfigjson Secret (and the legacy dockercfg).
func TestContainerDiskPullSecret(t *testing.T) {
	reg := startRegistry(t, "puller", "s3cret")
	reg.push(t, "private/disk:1", map[string][]byte{"disk/disk.qcow2": qcow2Disk(t, 0x44)})
	image := reg.host + "/private/disk:1"
	auth := dockerConfigJSON(reg.host, "puller", "s3cret")
	var legacy map[string]json.RawMessage
	if err := json.Unmarshal(auth[".dockerconfigjson"], &legacy); err != nil {
		t.Fatal(err)
	}
	secrets := objects{
		"ns/pull":   auth,
		"ns/legacy": {".dockercfg": legacy["auths"]},
		"ns/wrong":  dockerConfigJSON(reg.host, "puller", "nope"),
		"ns/opaque": {"password": []byte("x")},
	}
	for _, tc := range []struct{ secret, wantErr string }{
		{"", "401 Unauthorized"},
		{"wrong", "401 Unauthorized"},
		{"missing", `imagePullSecret: Secret ns/missing: ns/missing: not found`},
		{"opaque", "imagePullSecret: Secret ns/opaque: no key .dockerconfigjson or .dockercfg: expected a kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg Secret"},
		{"pull", ""},
		{"legacy", ""},
	} {
		t.Run("secret "+tc.secret, func(t *testing.T) {
			d, _ := newDisks(t, secrets, objects{})
			vol := volume("root", kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: image, ImagePullSecret: tc.secret}})
			err := d.Prepare(context.Background(), vmiWith("vm", vol))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Prepare: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestContainerDiskLayout: the disk is the single entry under /disk/ (raw
// or qcow2 by its magic) or containerDisk.path; none or several entries
// under /disk/, and a qcow2 naming a backing file, are refused.
func TestContainerDiskLayout(t *testing.T) {
	reg := startRegistry(t, "", "")
	qcow := qcow2Disk(t, 0x55)
	raw := make([]byte, 1<<20)
	copy(raw[4096:], "raw disk data")
	backed := filepath.Join(t.TempDir(), "backed.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", "-b", "/etc/hostname", "-F", "raw", backed)
	backedBytes, err := os.ReadFile(backed)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		files      map[string][]byte
		path       string
		wantFormat string
		wantErr    string
	}{
		{name: "raw under /disk/", files: map[string][]byte{"disk/disk.img": raw}, wantFormat: "raw"},
		{name: "qcow2 at path", files: map[string][]byte{"custom/vm.qcow2": qcow, "disk/other.img": raw}, path: "/custom/vm.qcow2", wantFormat: "qcow2"},
		{name: "nothing under /disk/", files: map[string][]byte{"data/disk.img": raw}, wantErr: "no file under /disk/ in the image"},
		{name: "no file at path", files: map[string][]byte{"disk/disk.img": raw}, path: "custom/vm.qcow2", wantErr: "no file /custom/vm.qcow2 in the image (containerDisk.path)"},
		{name: "two entries under /disk/", files: map[string][]byte{"disk/a.img": raw, "disk/b.img": raw}, wantErr: "more than one entry under /disk/ (/disk/a.img, /disk/b.img): set containerDisk.path"},
		{name: "a qcow2 with a backing file", files: map[string][]byte{"disk/disk.qcow2": backedBytes}, wantErr: "the qcow2 disk has a backing file (/etc/hostname): expected a self-contained image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tag := strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), "/", "")
			reg.push(t, "layout/"+tag+":1", tc.files)
			d, state := newDisks(t, objects{}, objects{})
			vol := volume("root", kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: reg.host + "/layout/" + tag + ":1", Path: tc.path}})
			vmi := vmiWith("vm", vol)
			err := d.Prepare(context.Background(), vmi)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Prepare: %v, want %q", err, tc.wantErr)
				}
				if left := treeFiles(t, filepath.Join(state, "containerdisks")); len(strings.Join(left, "")) > 0 && !onlyLocks(left) {
					t.Errorf("a refused pull left %v in the cache", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			src, _ := d.Resolve(vmi, vol)
			if _, format := backingOf(t, src.Path); format != tc.wantFormat {
				t.Errorf("backing format %s, want %s", format, tc.wantFormat)
			}
		})
	}
}

// onlyLocks reports whether the cache holds nothing but lock files and
// an empty refs directory.
func onlyLocks(files []string) bool {
	for _, f := range files {
		if !strings.HasSuffix(f, ".lock") {
			return false
		}
	}
	return true
}

// TestContainerDiskConcurrentPulls: VMIs prepared at once on one image
// all get an overlay on the same cache entry, whose layer was fetched
// once.
func TestContainerDiskConcurrentPulls(t *testing.T) {
	reg := startRegistry(t, "", "")
	reg.push(t, "cd/shared:1", map[string][]byte{"disk/disk.qcow2": qcow2Disk(t, 0x66)})
	reg.reset()
	d, _ := newDisks(t, objects{}, objects{})
	vol := containerDisk("root", reg.host+"/cd/shared:1", corev1.PullAlways)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.Prepare(context.Background(), vmiWith(fmt.Sprintf("vm%d", i), vol))
		}()
	}
	wg.Wait()
	backings := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("vm%d: %v", i, errs[i])
		}
		vmi := vmiWith(fmt.Sprintf("vm%d", i), vol)
		src, _ := d.Resolve(vmi, vol)
		b, _ := backingOf(t, src.Path)
		backings[b] = true
	}
	if len(backings) != 1 {
		t.Errorf("overlays on %d cache entries: %v", len(backings), backings)
	}
	// one layer blob and one config blob at most per fill
	if got := reg.count("GET blobs"); got > 2 {
		t.Errorf("%d blob fetches for %d concurrent pulls of one image, want the layer once", got, n)
	}
}

// TestPlainHTTPOnlyToLoopback: a registry that is not loopback is never
// reached over plain HTTP (go-containerregistry would fall back to it for
// private addresses).
func TestPlainHTTPOnlyToLoopback(t *testing.T) {
	var asked []string
	o := vmdisks.DefaultOptions(t.TempDir())
	o.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		asked = append(asked, r.URL.Scheme+"://"+r.URL.Host)
		return nil, fmt.Errorf("no network in this test")
	})
	disks, err := vmdisks.New(o)
	if err != nil {
		t.Fatal(err)
	}
	vol := containerDisk("root", "10.1.2.3:5000/cd/private:1", corev1.PullAlways)
	err = disks.Prepare(context.Background(), vmiWith("vm", vol))
	if err == nil {
		t.Fatal("pulled from nowhere")
	}
	for _, a := range asked {
		if strings.HasPrefix(a, "http://") {
			t.Errorf("plain HTTP request to %s reached the transport", a)
		}
	}
	if !strings.Contains(err.Error(), "https://10.1.2.3:5000") {
		t.Errorf("error %v does not name the HTTPS attempt", err)
	}
	if strings.Contains(err.Error(), "no network in this test") && !strings.Contains(err.Error(), "refused: registries other than loopback ones are reached over HTTPS only") {
		t.Logf("error: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestContainerDiskPullInBackground: a pull longer than PullWait goes on
// in the background: Prepare reports the volume not ready
// (domain.ErrVolumeNotReady, "pulling") without an overlay, and once the
// registry serves the layer a later Prepare makes the overlay from that
// same pull (the layer is fetched once).
func TestContainerDiskPullInBackground(t *testing.T) {
	reg := startRegistry(t, "", "")
	reg.push(t, "cd/slow:1", map[string][]byte{"disk/disk.qcow2": qcow2Disk(t, 0x88)})
	reg.reset()
	release := reg.gateBlobs(t)
	o := vmdisks.DefaultOptions(t.TempDir())
	o.PullWait = 50 * time.Millisecond
	d, err := vmdisks.New(o)
	if err != nil {
		t.Fatal(err)
	}
	vol := containerDisk("root", reg.host+"/cd/slow:1", "")
	vmi := vmiWith("vm", vol)
	src, _ := d.Resolve(vmi, vol)
	for range 3 {
		err := d.Prepare(context.Background(), vmi)
		if !errors.Is(err, domain.ErrVolumeNotReady) || !strings.Contains(err.Error(), "image "+reg.host+"/cd/slow:1: pulling (for ") {
			t.Fatalf("Prepare during the pull: %v, want a pull in progress", err)
		}
		if _, err := os.Stat(src.Path); !os.IsNotExist(err) {
			t.Fatalf("overlay during the pull: %v", err)
		}
	}
	release()
	deadline := time.Now().Add(60 * time.Second) // hang guard only
	for {
		err := d.Prepare(context.Background(), vmi)
		if err == nil {
			break
		}
		if !errors.Is(err, domain.ErrVolumeNotReady) || time.Now().After(deadline) {
			t.Fatalf("Prepare after the registry served: %v", err)
		}
	}
	if _, err := os.Stat(src.Path); err != nil {
		t.Errorf("overlay: %v", err)
	}
	if n := reg.count("GET blobs"); n > 2 {
		t.Errorf("%d blob fetches: the pull was started again", n)
	}
}
