package images_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/converge-dev/converge/internal/images"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// testVersion tags the images the tests build.
const testVersion = "v0.0.0-imagetest"

// built is one Build of both images by the tests.
type built struct {
	opts   images.Options
	result images.Result
	// node, controller and cli are the binaries inside.
	node, controller, cli string
}

// buildImages builds the binaries as hack/images does and runs
// images.Build into out, with the apt cache of the repository's bin/
// (bin/images/apt, shared with `make images`). It skips (fails with
// CONVERGE_REQUIRE_NODEPLANE=1) when the CNI plugins are not built or
// the Debian mirror is unreachable.
func buildImages(t *testing.T, binaries []string, out string) built {
	t.Helper()
	root := vmtest.RepoRoot(t)
	o, err := images.DefaultOptions(filepath.Join(root, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range o.CNIPlugins {
		_, err := os.Stat(p)
		vmtest.Require(t, err == nil, "CNI plugin %s missing: run make cni", p)
	}
	for _, bin := range []string{"apt-get", "dpkg-deb"} {
		_, err := exec.LookPath(bin)
		vmtest.Require(t, err == nil, "%s not found: the node image is made of Debian packages", bin)
	}
	o.Version = testVersion
	o.ControllerBinary, o.NodeBinary = binaries[0], binaries[1]
	o.CLIDir = filepath.Join(filepath.Dir(binaries[2]), "..", "..")
	o.Out = out
	o.Progress = &testLog{t: t}
	start := time.Now()
	res, err := images.Build(context.Background(), o)
	if errors.Is(err, images.ErrAptUnreachable) {
		vmtest.Require(t, false, "%v\nthe Debian mirror is unreachable; with it reachable, run: make images (it caches the packages in bin/images/apt)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("images.Build into %s: %s", out, time.Since(start).Round(time.Millisecond))
	return built{opts: o, result: res, controller: binaries[0], node: binaries[1], cli: binaries[2]}
}

// testLog writes progress lines to the test log.
type testLog struct{ t *testing.T }

func (l *testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// goBuildImageBinaries builds converge-controller (CGO_ENABLED=0),
// converge-node (cgo) and the converge CLI (CGO_ENABLED=0, in
// cli/<arch>/linux/) with the version flags, as hack/images does.
func goBuildImageBinaries(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for _, b := range []struct {
		pkg, cgo string
		out      string
	}{{"./cmd/converge-controller", "CGO_ENABLED=0", ""}, {"./cmd/converge-node", "CGO_ENABLED=1", ""},
		{"./cmd/converge", "CGO_ENABLED=0", filepath.Join("cli", runtime.GOARCH, "linux", "converge")}} {
		bin := filepath.Join(dir, filepath.Base(b.pkg))
		if b.out != "" {
			bin = filepath.Join(dir, b.out)
		}
		cmd := exec.Command("go", "build", "-ldflags", images.LDFlags(testVersion), "-o", bin, b.pkg)
		cmd.Dir = vmtest.RepoRoot(t)
		cmd.Env = append(os.Environ(), b.cgo)
		start := time.Now()
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s go build %s: %v\n%s", b.cgo, b.pkg, err, o)
		}
		t.Logf("%s go build %s: %s", b.cgo, b.pkg, time.Since(start).Round(time.Millisecond))
		out = append(out, bin)
	}
	return out
}

// sha256File digests a file.
func sha256File(t *testing.T, path string) string {
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

// TestBuild builds both images twice from the same inputs, into two
// directories with two work directories, and checks that the archives
// are byte-identical, that a third build with unchanged inputs leaves them
// alone, and then what is inside them and that containerd imports them.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both images (about a minute)")
	}
	bins := goBuildImageBinaries(t)
	dir := t.TempDir()
	first := buildImages(t, bins, filepath.Join(dir, "first"))
	second := buildImages(t, bins, filepath.Join(dir, "second"))

	t.Run("reproducible", func(t *testing.T) {
		for _, pair := range [][2]images.Archive{{first.result.Controller, second.result.Controller}, {first.result.Node, second.result.Node}} {
			a, b := pair[0], pair[1]
			if a.Skipped || b.Skipped {
				t.Fatalf("%s: a fresh output directory was skipped", a.Name)
			}
			da, db := sha256File(t, a.Path), sha256File(t, b.Path)
			if da != db {
				t.Errorf("%s: two builds from the same inputs differ: %s sha256:%s, %s sha256:%s", a.Name, a.Path, da, b.Path, db)
			}
			if a.Digest != b.Digest || a.ConfigDigest != b.ConfigDigest {
				t.Errorf("%s: manifest %s / %s, config %s / %s", a.Name, a.Digest, b.Digest, a.ConfigDigest, b.ConfigDigest)
			}
			t.Logf("%s: archive sha256:%s, %.1f MB (%.1f MB unpacked, %d files), manifest %s, image %s",
				a.Reference, da, float64(a.Size)/1e6, float64(a.UncompressedSize)/1e6, a.Files, a.Digest, a.ConfigDigest)
		}
	})

	t.Run("unchanged inputs are skipped", func(t *testing.T) {
		before := sha256File(t, first.result.Node.Path)
		res, err := images.Build(context.Background(), first.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Controller.Skipped || !res.Node.Skipped {
			t.Errorf("skipped: controller %v, node %v; want both", res.Controller.Skipped, res.Node.Skipped)
		}
		if res.Node.ConfigDigest != first.result.Node.ConfigDigest || sha256File(t, res.Node.Path) != before {
			t.Errorf("the skipped node archive changed")
		}
	})

	t.Run("controller image", func(t *testing.T) {
		img, files := readArchive(t, first.result.Controller)
		checkConfig(t, img, first.opts.Epoch)
		cfg, _ := img.ConfigFile()
		if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/usr/bin/converge-controller" {
			t.Errorf("entrypoint %q", got)
		}
		if cfg.Config.User != "65532:65532" {
			t.Errorf("user %q, want 65532:65532", cfg.Config.User)
		}
		same(t, files, first.controller, "usr/bin/converge-controller")
		same(t, files, first.cli, images.CLIPath+"/"+runtime.GOARCH+"/linux/converge")
		contains(t, files, "etc/passwd", "nonroot:x:65532:65532:")
		contains(t, files, "etc/group", "nonroot:x:65532:")
		checkCABundle(t, files)
		checkUpdateCACertificates(t, first.opts.Apt, files)
		if info, ok := files.hdr["tmp"]; !ok || info.Mode != 0o1777 {
			t.Errorf("/tmp: %+v, want a directory of mode 1777", info)
		}
	})

	t.Run("node image", func(t *testing.T) {
		img, files := readArchive(t, first.result.Node)
		checkConfig(t, img, first.opts.Epoch)
		cfg, _ := img.ConfigFile()
		if len(cfg.Config.Entrypoint) != 0 || len(cfg.Config.Cmd) != 0 {
			t.Errorf("entrypoint %q, cmd %q: want none (each container sets its command)", cfg.Config.Entrypoint, cfg.Config.Cmd)
		}
		same(t, files, first.node, "usr/bin/converge-node")
		for _, p := range first.opts.CNIPlugins {
			same(t, files, p, "opt/cni/bin/"+filepath.Base(p))
		}
		for _, p := range []string{"usr/sbin/libvirtd", "usr/sbin/virtlogd", "usr/bin/qemu-system-x86_64", "usr/bin/qemu-img", "usr/sbin/nft", "lib64/ld-linux-x86-64.so.2"} {
			files.executable(t, p)
		}
		for _, p := range []string{"usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so", "usr/share/seabios/bios-256k.bin", "usr/share/qemu/kvmvapic.bin"} {
			files.regular(t, p)
		}
		contains(t, files, "etc/passwd", "libvirt-qemu:x:64055:64055:")
		contains(t, files, "etc/group", "libvirt-qemu:x:64055:")
		checkCABundle(t, files)
		// every library converge-node needs on this host, at the same path
		// inside the image (ldd's paths; /lib is usr/lib there)
		out, err := exec.Command("ldd", first.node).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", first.node, err)
		}
		libs := regexp.MustCompile(`(?m)(?:=> )?(/\S+) \(0x`).FindAllStringSubmatch(string(out), -1)
		if len(libs) < 3 {
			t.Fatalf("ldd %s: expected libvirt, libc and ld.so at least:\n%s", first.node, out)
		}
		for _, m := range libs {
			if !files.tree.Exists(m[1]) {
				t.Errorf("converge-node needs %s (ldd), not in the image", m[1])
			}
		}
		if _, err := images.CheckLinked(files.tree, images.NodeLinked...); err != nil {
			t.Error(err)
		}
		if os.Geteuid() == 0 {
			runInRoot(t, files.root)
		} else {
			t.Log("not root: the image's programs are not run in a chroot")
		}
	})

	t.Run("containerd imports the archives", func(t *testing.T) {
		importIntoContainerd(t, first.result.Controller, first.result.Node)
	})
}

// checkConfig: linux/amd64, created at the epoch, every history entry too.
func checkConfig(t *testing.T, img v1.Image, epoch time.Time) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if !cfg.Created.Time.Equal(epoch) {
		t.Errorf("created %s, want %s", cfg.Created.Time, epoch)
	}
	for _, h := range cfg.History {
		if !h.Created.Time.Equal(epoch) {
			t.Errorf("history %q created %s, want %s", h.CreatedBy, h.Created.Time, epoch)
		}
	}
	if !strings.Contains(strings.Join(cfg.Config.Env, " "), "PATH=") {
		t.Errorf("env %q has no PATH", cfg.Config.Env)
	}
}

// imageFiles is an image's file system unpacked on disk.
type imageFiles struct {
	root string
	tree *images.Tree
	hdr  map[string]*tar.Header
}

// readArchive reads the docker-archive a as containerd would (its tag),
// unpacks the flattened file system into a temporary directory and
// checks every entry's owner and time.
func readArchive(t *testing.T, a images.Archive) (v1.Image, imageFiles) {
	t.Helper()
	img, err := tarball.ImageFromPath(a.Path, nil)
	if err != nil {
		t.Fatalf("%s: %v", a.Path, err)
	}
	cfgName, _ := img.ConfigName()
	if cfgName.String() != a.ConfigDigest {
		t.Errorf("%s: config %s, Build said %s", a.Path, cfgName, a.ConfigDigest)
	}
	root := t.TempDir()
	files := imageFiles{root: root, hdr: map[string]*tar.Header{}}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	epoch, _ := images.SourceDateEpoch()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := strings.TrimSuffix(h.Name, "/")
		files.hdr[p] = h
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) {
			t.Errorf("/%s: owner %d:%d (%q:%q), time %s; want 0:0 without names at %s", p, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, epoch)
		}
		full := filepath.Join(root, p)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(full, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, full)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(full, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm()|0o200); err == nil {
				_, err = io.Copy(f, tr)
				f.Close()
			}
		default:
			t.Errorf("/%s: unexpected entry type %c", p, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	files.tree = images.NewTree()
	if err := files.tree.AddDisk(root, "image", func(p string) string { return p }); err != nil {
		t.Fatal(err)
	}
	if len(files.hdr) != a.Files {
		t.Errorf("%s: %d entries, Build counted %d", a.Path, len(files.hdr), a.Files)
	}
	return img, files
}

// executable checks that p names a regular file with an x bit.
func (f imageFiles) executable(t *testing.T, p string) {
	t.Helper()
	r, err := f.tree.Resolve(p)
	if err != nil {
		t.Error(err)
		return
	}
	h := f.hdr[r]
	if h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
		t.Errorf("/%s (/%s): want an executable file, got %+v", p, r, h)
	}
}

// regular checks that p names a regular file.
func (f imageFiles) regular(t *testing.T, p string) {
	t.Helper()
	r, err := f.tree.Resolve(p)
	if err != nil {
		t.Error(err)
		return
	}
	if h := f.hdr[r]; h == nil || h.Typeflag != tar.TypeReg {
		t.Errorf("/%s (/%s): want a regular file, got %+v", p, r, h)
	}
}

// same checks that the image's file p is the file src.
func same(t *testing.T, f imageFiles, src, p string) {
	t.Helper()
	f.executable(t, p)
	if got, want := sha256File(t, filepath.Join(f.root, p)), sha256File(t, src); got != want {
		t.Errorf("/%s is not %s", p, src)
	}
}

// contains checks a line prefix in a text file of the image.
func contains(t *testing.T, f imageFiles, p, line string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.root, p))
	if err != nil {
		t.Error(err)
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, line) {
			return
		}
	}
	t.Errorf("/%s has no line starting %q:\n%s", p, line, b)
}

// checkCABundle: the bundle holds Debian's certificates, all PEM
// certificates, and none of the host's local CAs.
func checkCABundle(t *testing.T, f imageFiles) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.root, images.CABundlePath))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rest := b; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			t.Errorf("%s: a %s block", images.CABundlePath, block.Type)
		}
	}
	if n < 100 {
		t.Errorf("%s: %d certificates, want Mozilla's (well over 100)", images.CABundlePath, n)
	}
	local, _ := filepath.Glob("/usr/local/share/ca-certificates/*.crt")
	for _, l := range local {
		lb, err := os.ReadFile(l)
		if err == nil && len(bytes.TrimSpace(lb)) > 0 && bytes.Contains(b, bytes.TrimSpace(lb)) {
			t.Errorf("%s holds the host's local CA %s", images.CABundlePath, l)
		}
	}
}

// runInRoot runs each program of the node image in a chroot of its
// unpacked file system, with an empty environment, so that every program
// finds its loader, libraries and data files in the image alone.
func runInRoot(t *testing.T, root string) {
	t.Helper()
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/sbin/libvirtd", "--version"}, "libvirtd (libvirt) 9.0.0"},
		{[]string{"/usr/sbin/virtlogd", "--version"}, "virtlogd (libvirt) 9.0.0"},
		{[]string{"/usr/bin/qemu-system-x86_64", "--version"}, "QEMU emulator version 7.2"},
		{[]string{"/usr/bin/qemu-img", "--version"}, "qemu-img version 7.2"},
		{[]string{"/usr/sbin/nft", "--version"}, "nftables v1.0.6"},
		{[]string{"/usr/bin/converge-node", "--help"}, "converge's node agents"},
		{[]string{"/opt/cni/bin/bridge"}, "CNI bridge plugin v"},
		{[]string{"/opt/cni/bin/host-local"}, "CNI host-local plugin v"},
		{[]string{"/opt/cni/bin/loopback"}, "CNI loopback plugin v"},
	} {
		cmd := exec.Command("chroot", append([]string{root}, tc.argv...)...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin"}
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("chroot <node image> %s: want %q in:\n%s", strings.Join(tc.argv, " "), tc.want, out)
		}
	}
}

// checkUpdateCACertificates compares the image's CA bundle with the one
// Debian's own update-ca-certificates (the host's script, run on the
// ca-certificates package of the image, as its postinst does on a fresh
// install) writes.
func checkUpdateCACertificates(t *testing.T, apt images.AptOptions, f imageFiles) {
	t.Helper()
	if _, err := exec.LookPath("update-ca-certificates"); err != nil {
		t.Log("update-ca-certificates not found: the bundle is not compared with Debian's")
		return
	}
	pkgs, err := images.Fetch(context.Background(), apt, "ca-certificates")
	if err != nil {
		t.Fatal(err)
	}
	var deb string
	for _, p := range pkgs {
		if p.Name == "ca-certificates" {
			deb = p.File
		}
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
	}
	for _, d := range []string{"etc", "local", "hooks"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "ca-certificates.conf")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("update-ca-certificates", "--default", "--certsconf", conf,
		"--certsdir", filepath.Join(root, "usr/share/ca-certificates"), "--localcertsdir", filepath.Join(dir, "local"),
		"--etccertsdir", filepath.Join(dir, "etc"), "--hooksdir", filepath.Join(dir, "hooks"))
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update-ca-certificates: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(dir, "etc", "ca-certificates.crt"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(f.root, images.CABundlePath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("/%s (%d bytes) differs from what update-ca-certificates writes from %s (%d bytes)", images.CABundlePath, len(got), filepath.Base(deb), len(want))
	}
}
