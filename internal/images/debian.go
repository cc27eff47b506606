package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"
)

// mergedDirs are the top-level directories Debian 12 makes symlinks into
// /usr ("merged /usr", the default of debootstrap and of Debian's images
// since bookworm): a package's /lib/x lands at /usr/lib/x.
var mergedDirs = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// slimmed are the documentation trees left out of the image, as Debian's
// slim images (debuerreotype's .slimify-excludes) do; each package's
// /usr/share/doc/<package>/copyright stays (.slimify-includes).
var slimmed = []string{"usr/share/doc", "usr/share/info", "usr/share/linda", "usr/share/lintian/overrides", "usr/share/locale", "usr/share/man"}

// Unpack extracts each package's files (dpkg-deb -x: data only, no
// maintainer scripts run) into a directory of its own under work, in
// parallel, and adds them to a new Tree in package-name order: paths under
// the merged directories move to /usr, and /bin, /sbin, /lib and /lib64
// become symlinks to usr/…; documentation is slimmed. Two packages
// shipping one path with different contents is an error naming both.
func Unpack(ctx context.Context, pkgs []Package, work string) (*Tree, error) {
	pkgs = append([]Package(nil), pkgs...)
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	dirs := make([]string, len(pkgs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0) + 1)
	for i, p := range pkgs {
		dirs[i] = filepath.Join(work, p.Name)
		g.Go(func() error { return extract(gctx, p, dirs[i]) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	t := NewTree()
	for i, p := range pkgs {
		if err := t.AddDisk(dirs[i], p.Name+" "+p.Version, imagePath); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		if err := t.Symlink(d, "usr/"+d, "merged /usr"); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// extract runs dpkg-deb -x for p into dir (emptied first).
func extract(ctx context.Context, p Package, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "dpkg-deb", "-x", p.File, dir)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("dpkg-deb -x %s: %w: %s", p.File, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// imagePath maps a path of an unpacked package to its image path: merged
// /usr, and "" for slimmed documentation (keeping usr/share/doc/<pkg> and
// its copyright).
func imagePath(p string) string {
	top, _, _ := strings.Cut(p, "/")
	for _, d := range mergedDirs {
		if top == d {
			p = "usr/" + p
			break
		}
	}
	for _, s := range slimmed {
		rest, ok := strings.CutPrefix(p, s+"/")
		if !ok {
			continue
		}
		if s == "usr/share/doc" {
			if pkg, file, sub := strings.Cut(rest, "/"); !sub || (file == "copyright" && !strings.Contains(pkg, "/")) {
				return p
			}
		}
		return ""
	}
	return p
}
