package images

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// NodePackages are the Debian packages whose closure the node image
// holds, each for a program the node roles run:
var NodePackages = []string{
	"libvirt-daemon",             // libvirtd and virtlogd (converge-node libvirtd runs them)
	"libvirt-daemon-driver-qemu", // libvirtd's QEMU driver, qemu:///system
	"libvirt0",                   // libvirt.so.0, converge-node's cgo link
	"qemu-system-x86",            // qemu-system-x86_64, the domains' emulator; seabios, ipxe-qemu come as Depends
	"qemu-utils",                 // qemu-img: the CDI importer's qemu-img info and convert
	"nftables",                   // nft: the bridge plugin's macspoofchk (and ipMasq's nftables backend)
}

// caPackage ships the CA certificates both images' bundle is made of.
const caPackage = "ca-certificates"

// Names of the two images, and of their archives (<Name>.tar in Out).
const (
	ControllerName = "converge-controller"
	NodeName       = "converge-node"
)

// Options are the inputs of Build.
type Options struct {
	// Version tags both images; every Go binary must have been built with
	// it (BinaryVersion).
	Version string
	// ControllerBinary is converge-controller, built with CGO_ENABLED=0.
	ControllerBinary string
	// CLIDir holds the converge CLI binaries the controller image carries
	// at CLIPath for its cli-download server: <arch>/<os>/converge[.exe],
	// each built with Version (hack/images builds linux/<host arch>;
	// `make cli-binaries` adds the others). Required: it must hold at
	// least one.
	CLIDir string
	// NodeBinary is converge-node (cgo, linked against libvirt0).
	NodeBinary string
	// CNIPlugins are the CNI plugin binaries for /opt/cni/bin.
	CNIPlugins []string
	// NodePackages are the Debian packages of the node image.
	NodePackages []string
	// Apt fetches the packages.
	Apt AptOptions
	// Out is the directory of the archives and their .inputs stamps.
	Out string
	// Work holds the unpacked packages and layers while building; empty
	// means a temporary directory, removed afterwards.
	Work string
	// Epoch is every file's time and the images' creation time.
	Epoch time.Time
	// GzipLevel is the layers' compress/gzip level.
	GzipLevel int
	// Progress receives a line per step and apt's output; nil discards.
	Progress io.Writer
}

// DefaultOptions gives the options of `make images` for the repository's
// bin directory: version "dev", the binaries hack/images builds in
// bin/images/build, the CNI plugins of bin/cni (bridge, host-local,
// loopback), NodePackages, apt's state in bin/images/apt, archives in
// bin/images, times from $SOURCE_DATE_EPOCH (0 when unset) and gzip's
// fastest level (go-containerregistry's default too): measured on this
// machine, a whole build took about half as long as at the default level
// (23 s against 43 s, loaded) for archives 10 % larger (node 133 MB
// against 120 MB); level 9 gave 119.5 MB in 109 s.
func DefaultOptions(bin string) (Options, error) {
	epoch, err := SourceDateEpoch()
	if err != nil {
		return Options{}, err
	}
	out := filepath.Join(bin, "images")
	plugins := make([]string, 0, 3)
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		plugins = append(plugins, filepath.Join(bin, "cni", p))
	}
	return Options{
		Version:          DefaultVersion,
		ControllerBinary: filepath.Join(out, "build", ControllerName),
		CLIDir:           filepath.Join(out, "build", "cli"),
		NodeBinary:       filepath.Join(out, "build", NodeName),
		CNIPlugins:       plugins,
		NodePackages:     append([]string(nil), NodePackages...),
		Apt:              DefaultAptOptions(filepath.Join(out, "apt")),
		Out:              out,
		Epoch:            epoch,
		GzipLevel:        gzip.BestSpeed,
	}, nil
}

// SourceDateEpoch gives the time $SOURCE_DATE_EPOCH sets (seconds since
// 1970, reproducible-builds.org's convention), or the Unix epoch when it
// is unset.
func SourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: expected a non-negative number of seconds since 1970", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// Archive is one written (or already current) image archive.
type Archive struct {
	// Name is converge-controller or converge-node.
	Name string `json:"name"`
	// Reference is the tag inside the archive.
	Reference string `json:"reference"`
	// Path of the archive.
	Path string `json:"path"`
	// Digest of the image's manifest as go-containerregistry writes it,
	// and ConfigDigest, the image ID (what `crictl images` shows).
	Digest       string `json:"digest"`
	ConfigDigest string `json:"configDigest"`
	// Size of the archive and of the layers unpacked, in bytes.
	Size             int64 `json:"size"`
	UncompressedSize int64 `json:"uncompressedSize"`
	// Files in the image (directories and links included).
	Files int `json:"files"`
	// Skipped is true when the archive's inputs had not changed and it
	// was left as it was.
	Skipped bool `json:"-"`
}

// Result is what Build did.
type Result struct {
	Controller, Node Archive
	// Packages are the Debian packages of the node image.
	Packages []Package
}

// Build writes both archives into o.Out: it checks the binaries' version,
// fetches the Debian packages (Fetch), then for each image compares a
// digest of its inputs (this builder's own executable, the version,
// epoch and gzip level, every binary's and plugin's bytes, the packages'
// names, versions and .deb sizes) with the stamp <Name>.tar.inputs
// beside the archive; when they match the archive is left as it is,
// otherwise the image is built and written and the stamp replaced.
func Build(ctx context.Context, o Options) (Result, error) {
	if o.Version == "" || o.Out == "" || o.ControllerBinary == "" || o.NodeBinary == "" || len(o.NodePackages) == 0 {
		return Result{}, errors.New("images: options need Version, Out, ControllerBinary, NodeBinary and NodePackages")
	}
	p := out(o.Progress)
	for _, b := range []string{o.ControllerBinary, o.NodeBinary} {
		v, err := BinaryVersion(b)
		if err != nil {
			return Result{}, err
		}
		if v != o.Version {
			return Result{}, fmt.Errorf("%s was built with version %q, the images are tagged %q: build it with -ldflags %q", b, v, o.Version, LDFlags(o.Version))
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return Result{}, err
	}
	work := o.Work
	if work == "" {
		tmp, err := os.MkdirTemp("", "converge-images-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	self, err := selfDigest()
	if err != nil {
		return Result{}, err
	}

	start := time.Now()
	fmt.Fprintf(p, "images: resolving and downloading the Debian packages (%s) into %s\n", strings.Join(o.NodePackages, " "), o.Apt.Dir)
	apt := o.Apt
	if apt.Output == nil {
		apt.Output = o.Progress
	}
	nodePkgs, err := Fetch(ctx, apt, o.NodePackages...)
	if err != nil {
		return Result{}, err
	}
	caPkgs, err := Fetch(ctx, apt, caPackage)
	if err != nil {
		return Result{}, err
	}
	ca, err := onePackage(caPkgs, caPackage)
	if err != nil {
		return Result{}, err
	}
	fmt.Fprintf(p, "images: %d packages for the node image and %s %s, in %s\n", len(nodePkgs), ca.Name, ca.Version, time.Since(start).Round(time.Millisecond))
	res := Result{Packages: nodePkgs}

	common := fmt.Sprintf("builder %s\nversion %s\nepoch %d\ngzip %d\n", self, o.Version, o.Epoch.Unix(), o.GzipLevel)
	var caBundle []byte
	bundle := func() ([]byte, error) {
		if caBundle != nil {
			return caBundle, nil
		}
		t, err := Unpack(ctx, []Package{ca}, filepath.Join(work, "ca"))
		if err != nil {
			return nil, err
		}
		caBundle, err = CABundle(t)
		return caBundle, err
	}

	cli, err := CLIBinaries(o.CLIDir)
	if err != nil {
		return Result{}, err
	}
	ctrlFiles := []string{o.ControllerBinary}
	for _, rel := range sortedKeys(cli) {
		v, err := BinaryVersion(cli[rel])
		if err != nil {
			return Result{}, err
		}
		if v != o.Version {
			return Result{}, fmt.Errorf("%s was built with version %q, the images are tagged %q: build it with -ldflags %q", cli[rel], v, o.Version, LDFlags(o.Version))
		}
		ctrlFiles = append(ctrlFiles, cli[rel])
	}
	ctrlInputs, err := inputs(common, ctrlFiles, []Package{ca})
	if err != nil {
		return Result{}, err
	}
	res.Controller, err = buildOne(o, ControllerName, ControllerReference(o.Version), ctrlInputs, func() (Spec, error) {
		b, err := bundle()
		if err != nil {
			return Spec{}, err
		}
		return ControllerSpec(o.Version, o.ControllerBinary, b, cli)
	}, work)
	if err != nil {
		return res, err
	}

	nodeInputs, err := inputs(common+"packages "+strings.Join(o.NodePackages, " ")+"\n", append([]string{o.NodeBinary}, o.CNIPlugins...), append(append([]Package{}, nodePkgs...), ca))
	if err != nil {
		return Result{}, err
	}
	res.Node, err = buildOne(o, NodeName, NodeReference(o.Version), nodeInputs, func() (Spec, error) {
		b, err := bundle()
		if err != nil {
			return Spec{}, err
		}
		t0 := time.Now()
		debian, err := Unpack(ctx, nodePkgs, filepath.Join(work, "debs"))
		if err != nil {
			return Spec{}, err
		}
		fmt.Fprintf(p, "images: unpacked %d packages (%d files) in %s\n", len(nodePkgs), debian.Len(), time.Since(t0).Round(time.Millisecond))
		s, err := NodeSpec(o.Version, debian, len(nodePkgs), o.NodeBinary, o.CNIPlugins, b)
		if err != nil {
			return Spec{}, err
		}
		if _, err := CheckLinked(s.Files(), NodeLinked...); err != nil {
			return Spec{}, err
		}
		return s, nil
	}, work)
	return res, err
}

// NodeLinked are the node image's programs and the modules libvirtd
// loads whose dynamic linking Build checks inside the image
// (CheckLinked).
var NodeLinked = []string{
	"/" + NodeBinaryPath,
	"/usr/sbin/libvirtd",
	"/usr/sbin/virtlogd",
	"/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so",
	"/usr/bin/qemu-system-x86_64",
	"/usr/bin/qemu-img",
	"/usr/sbin/nft",
}

// onePackage gives the package called name from pkgs.
func onePackage(pkgs []Package, name string) (Package, error) {
	for _, p := range pkgs {
		if p.Name == name {
			return p, nil
		}
	}
	return Package{}, fmt.Errorf("apt: %s is not among the packages resolved for it", name)
}

// stamp is the content of <archive>.inputs.
type stamp struct {
	Inputs  string  `json:"inputs"`
	Archive Archive `json:"archive"`
}

// buildOne writes the archive name unless its stamp says inputs are
// unchanged.
func buildOne(o Options, name, ref, inputs string, spec func() (Spec, error), work string) (Archive, error) {
	p := out(o.Progress)
	file := filepath.Join(o.Out, name+".tar")
	stampFile := file + ".inputs"
	if b, err := os.ReadFile(stampFile); err == nil {
		var s stamp
		if json.Unmarshal(b, &s) == nil && s.Inputs == inputs && s.Archive.Path == file {
			if fi, err := os.Stat(file); err == nil && fi.Size() == s.Archive.Size {
				fmt.Fprintf(p, "images: %s: inputs unchanged, %s left as it is\n", ref, file)
				s.Archive.Skipped = true
				return s.Archive, nil
			}
		}
	}
	start := time.Now()
	fmt.Fprintf(p, "images: building %s\n", ref)
	s, err := spec()
	if err != nil {
		return Archive{}, fmt.Errorf("%s: %w", ref, err)
	}
	img, err := s.Image(work, name, o.Epoch, o.GzipLevel)
	if err != nil {
		return Archive{}, fmt.Errorf("%s: %w", ref, err)
	}
	if err := WriteArchive(file, ref, img); err != nil {
		return Archive{}, fmt.Errorf("%s: %w", ref, err)
	}
	a, err := describe(name, ref, file, img, s)
	if err != nil {
		return Archive{}, err
	}
	b, err := json.MarshalIndent(stamp{Inputs: inputs, Archive: a}, "", "  ")
	if err != nil {
		return Archive{}, err
	}
	if err := os.WriteFile(stampFile, append(b, '\n'), 0o644); err != nil {
		return Archive{}, err
	}
	fmt.Fprintf(p, "images: wrote %s (%s, %.1f MB, %.1f MB unpacked) in %s\n", file, ref, float64(a.Size)/1e6, float64(a.UncompressedSize)/1e6, time.Since(start).Round(time.Millisecond))
	return a, nil
}

// describe gives the Archive of an image written to file.
func describe(name, ref, file string, img v1.Image, s Spec) (Archive, error) {
	d, err := img.Digest()
	if err != nil {
		return Archive{}, err
	}
	cd, err := img.ConfigName()
	if err != nil {
		return Archive{}, err
	}
	fi, err := os.Stat(file)
	if err != nil {
		return Archive{}, err
	}
	var unpacked int64
	layers, err := img.Layers()
	if err != nil {
		return Archive{}, err
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return Archive{}, err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return Archive{}, err
		}
		unpacked += n
	}
	return Archive{Name: name, Reference: ref, Path: file, Digest: d.String(), ConfigDigest: cd.String(),
		Size: fi.Size(), UncompressedSize: unpacked, Files: s.Files().Len()}, nil
}

// inputs digests what an image is made of.
func inputs(common string, files []string, pkgs []Package) (string, error) {
	h := sha256.New()
	io.WriteString(h, common)
	for _, f := range files {
		s, err := fileDigest(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "file %s %s\n", filepath.Base(f), s)
	}
	for _, p := range pkgs {
		fi, err := os.Stat(p.File)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "deb %s %s %s %d\n", p.Name, p.Version, p.Architecture, fi.Size())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fileDigest gives the SHA-256 of a file.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// selfDigest digests the running executable, so a change to this
// builder's code changes every image's inputs.
func selfDigest() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return fileDigest(exe)
}
