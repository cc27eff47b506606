package images

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Paths in the images: the two binaries and the CNI plugins' directory.
const (
	ControllerBinaryPath = "usr/bin/converge-controller"
	NodeBinaryPath       = "usr/bin/converge-node"
	CNIDir               = "opt/cni/bin"
)

// defaultPath is PATH in both images, Debian's for root.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Layer is one layer of an image in the making: its files and what
// History says created it.
type Layer struct {
	Tree      *Tree
	CreatedBy string
}

// Spec is an image before it is written: its layers, bottom first, and
// its run configuration.
type Spec struct {
	Layers []Layer
	Config v1.Config
}

// Image builds the image of s: each layer written (gzip level) into dir
// as <name>-<i>.tar.gz, on linux/amd64, every time (files, history,
// created) set to epoch.
func (s Spec) Image(dir, name string, epoch time.Time, level int) (v1.Image, error) {
	cfg := &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Created:      v1.Time{Time: epoch.UTC()},
		Config:       s.Config,
		RootFS:       v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	for i, l := range s.Layers {
		layer, err := l.Tree.Layer(filepath.Join(dir, fmt.Sprintf("%s-%d.tar.gz", name, i)), epoch, level)
		if err != nil {
			return nil, fmt.Errorf("%s layer %d (%s): %w", name, i, l.CreatedBy, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: epoch.UTC()}, CreatedBy: l.CreatedBy, Comment: "converge internal/images",
		}})
		if err != nil {
			return nil, err
		}
	}
	return mutate.CreatedAt(img, v1.Time{Time: epoch.UTC()})
}

// Files gives the image's file system as one tree: the layers merged,
// upper ones over lower ones (no whiteouts are written, so nothing is
// removed).
func (s Spec) Files() *Tree {
	all := NewTree()
	for _, l := range s.Layers {
		for p, e := range l.Tree.entries {
			all.entries[p] = e
		}
	}
	return all
}

// labels of both images, as OCI's pre-defined annotation keys.
func labels(title, version string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":   title,
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/converge-dev/converge",
	}
}

// ControllerSpec gives the converge-controller image: a base layer with
// /etc/passwd and /etc/group (root and nonroot, 65532), the CA bundle at
// CABundlePath, /tmp (sticky, 1777) and /home/nonroot, then a layer holding the
// binary at ControllerBinaryPath, its entrypoint, and the CLI binaries cli
// (path below CLIPath → file on disk, CLIBinaries) for its cli-download
// server; the user is 65532:65532, as the Deployment's securityContext.
func ControllerSpec(version, binary string, caBundle []byte, cli map[string]string) (Spec, error) {
	base := NewTree()
	const o = "converge images"
	for _, err := range []error{
		base.File("etc/passwd", []byte(controllerPasswd), 0o644, o),
		base.File("etc/group", []byte(controllerGroup), 0o644, o),
		base.File(CABundlePath, caBundle, 0o644, "ca-certificates"),
		base.Dir("tmp", fs.ModeSticky|0o777, o),
		base.Dir("home/nonroot", 0o755, o),
		base.Dir("root", 0o700, o),
	} {
		if err != nil {
			return Spec{}, err
		}
	}
	bin := NewTree()
	if err := bin.CopyFile(ControllerBinaryPath, binary, 0o755, "converge-controller"); err != nil {
		return Spec{}, err
	}
	clis := NewTree()
	for _, rel := range sortedKeys(cli) {
		if err := clis.CopyFile(CLIPath+"/"+rel, cli[rel], 0o755, "converge CLI "+rel); err != nil {
			return Spec{}, err
		}
	}
	return Spec{
		Layers: []Layer{
			{Tree: base, CreatedBy: "users root and nonroot (65532), Debian CA bundle"},
			{Tree: clis, CreatedBy: "converge CLI binaries " + version},
			{Tree: bin, CreatedBy: "converge-controller " + version},
		},
		Config: v1.Config{
			Entrypoint: []string{"/" + ControllerBinaryPath},
			User:       fmt.Sprintf("%d:%d", NonrootUID, NonrootUID),
			Env:        []string{defaultPath, "HOME=/home/nonroot"},
			WorkingDir: "/",
			Labels:     labels("converge-controller", version),
		},
	}, nil
}

// NodeSpec gives the converge-node image: the Debian layer (the unpacked
// packages, Unpack), then a layer with converge-node at NodeBinaryPath,
// the CNI plugins at CNIDir, /etc/passwd and /etc/group (nodePasswd,
// nodeGroup), the CA bundle and the directories a Debian root has that no
// package ships (/tmp, /run with /var/run and /var/lock pointing there,
// /root). No entrypoint: each container of the node roles sets its
// command.
func NodeSpec(version string, debian *Tree, packages int, binary string, plugins []string, caBundle []byte) (Spec, error) {
	top := NewTree()
	const o = "converge images"
	errs := []error{
		top.CopyFile(NodeBinaryPath, binary, 0o755, "converge-node"),
		top.File("etc/passwd", []byte(nodePasswd), 0o644, o),
		top.File("etc/group", []byte(nodeGroup), 0o644, o),
		top.File(CABundlePath, caBundle, 0o644, "ca-certificates"),
		top.Dir("tmp", fs.ModeSticky|0o777, o),
		top.Dir("var/tmp", fs.ModeSticky|0o777, o),
		top.Dir("run", 0o755, o),
		top.Dir("run/lock", fs.ModeSticky|0o777, o),
		top.Symlink("var/run", "/run", o),
		top.Symlink("var/lock", "/run/lock", o),
		top.Dir("root", 0o700, o),
	}
	for _, p := range plugins {
		errs = append(errs, top.CopyFile(CNIDir+"/"+filepath.Base(p), p, 0o755, "CNI plugin "+filepath.Base(p)))
	}
	for _, err := range errs {
		if err != nil {
			return Spec{}, err
		}
	}
	for _, p := range top.Paths() {
		if e, ok := debian.entries[p]; ok && e.typ != top.entries[p].typ {
			return Spec{}, fmt.Errorf("/%s: converge's layer adds %s over %s from %s", p, top.entries[p].describe(), e.describe(), e.origin)
		}
	}
	return Spec{
		Layers: []Layer{
			{Tree: debian, CreatedBy: fmt.Sprintf("%d Debian bookworm packages, unpacked", packages)},
			{Tree: top, CreatedBy: "converge-node " + version + ", CNI plugins, users, CA bundle"},
		},
		Config: v1.Config{
			Env:        []string{defaultPath},
			WorkingDir: "/",
			Labels:     labels("converge-node", version),
		},
	}, nil
}
