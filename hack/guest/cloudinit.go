package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
)

// cloudInitPackage is what the cloud-init flavour of the guest runs:
// Debian's cloud-init, with its whole Depends/Pre-Depends closure.
const cloudInitPackage = "cloud-init"

// cloudInitConfig is /etc/cloud/cloud.cfg.d/90-converge.cfg of the
// cloud-init guest: the datasources KubeVirt gives a VM (NoCloud and
// ConfigDrive disks), no network rendering (the guest has no systemd or
// ifupdown; init's udhcpc configures it) and the modules that make sense
// without them: the hostname and files from the data, bootcmd, runcmd and
// the per-boot/instance/user scripts, and the final message on the
// console.
const cloudInitConfig = `# converge's cloud-init guest (hack/guest): its /init runs the stages
datasource_list: [NoCloud, ConfigDrive, None]
network: {config: disabled}
cloud_init_modules: [seed_random, bootcmd, write-files, set_hostname, update_hostname, update_etc_hosts]
cloud_config_modules: [runcmd]
cloud_final_modules: [scripts-per-once, scripts-per-boot, scripts-per-instance, scripts-user, final-message]
`

// cloudInitSyslinux is the cloud-init disk's SYSLINUX configuration: as
// syslinux.cfg, with converge.cloudinit=run (init runs cloud-init instead
// of printing the user data).
func cloudInitSyslinux() []byte {
	return bytes.Replace(syslinuxConfig, []byte("converge.cloudinit=1"), []byte("converge.cloudinit=run"), 1)
}

// cloudInitPackages gives the packages of cloud-init's closure (apt-cache
// depends --recurse, Depends and Pre-Depends; virtual names dropped) with
// their candidate versions, from two apt-cache calls.
func cloudInitPackages() (map[string]string, error) {
	deps, err := run("", "apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances", cloudInitPackage)
	if err != nil {
		return nil, err
	}
	var names []string
	seen := map[string]bool{}
	for _, l := range strings.Split(deps, "\n") {
		// package lines start in column 0; dependency lines are indented,
		// virtual packages are <bracketed>
		if l == "" || l[0] == ' ' || l[0] == '<' || seen[l] {
			continue
		}
		seen[l] = true
		names = append(names, l)
	}
	show, err := run("", "apt-cache", append([]string{"show", "--no-all-versions"}, names...)...)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	pkg := ""
	for _, l := range strings.Split(show, "\n") {
		if v, ok := strings.CutPrefix(l, "Package: "); ok {
			pkg = v
		} else if v, ok := strings.CutPrefix(l, "Version: "); ok && pkg != "" {
			out[pkg] = v
		}
	}
	if out[cloudInitPackage] == "" {
		return nil, fmt.Errorf("apt: no %s candidate (apt-get update?)", cloudInitPackage)
	}
	return out, nil
}

// cloudInitStamp is the part of the stamp of cloudinit.img beyond the base
// guest's: the packages and the configuration.
func cloudInitStamp(pkgs map[string]string) string {
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "ci:%s=%s\n", n, pkgs[n])
	}
	fmt.Fprintf(&b, "ci:config=%x\nci:layout=2\n", sha256.Sum256([]byte(cloudInitConfig)))
	return b.String()
}

// cloudInitTree downloads the packages into dir and unpacks them into
// dir/root (dpkg-deb -x, nothing installed), without documentation, man
// pages and translations, with /etc/passwd and /etc/group holding root and
// cloudInitConfig; it gives the root.
func cloudInitTree(dir string, pkgs map[string]string) (string, error) {
	var specs []string
	for n, v := range pkgs {
		specs = append(specs, n+"="+v)
	}
	sort.Strings(specs)
	if _, err := run(dir, "apt-get", append([]string{"download", "-q"}, specs...)...); err != nil {
		return "", err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	if len(files) != len(specs) {
		return "", fmt.Errorf("%s: expected %d downloaded .deb files, found %d", dir, len(specs), len(files))
	}
	root := filepath.Join(dir, "root")
	for _, f := range files {
		if _, err := run(dir, "dpkg-deb", "-x", f, root); err != nil {
			return "", err
		}
	}
	for _, d := range []string{"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/i18n"} {
		if err := os.RemoveAll(filepath.Join(root, d)); err != nil {
			return "", err
		}
	}
	// base-passwd is not in the closure: root and the groups cloud-init
	// gives its log
	for name, body := range map[string]string{"passwd": "root:x:0:0:root:/root:/bin/sh\n", "group": "root:x:0:\nadm:x:4:\n"} {
		if err := os.WriteFile(filepath.Join(root, "etc", name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	cfg := filepath.Join(root, "etc", "cloud", "cloud.cfg.d", "90-converge.cfg")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		return "", err
	}
	return root, os.WriteFile(cfg, []byte(cloudInitConfig), 0o644)
}

// treeArchive gives a gzip'd newc cpio archive of every directory, regular
// file and symbolic link below root, sorted, with fixed times, to append
// to the base initramfs (the kernel unpacks concatenated archives in
// order).
func treeArchive(root string) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	w := cpio.NewWriter(zw)
	ino := int64(1 << 20) // after the base archive's
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		ino++
		h := &cpio.Header{Name: filepath.ToSlash(rel), Mode: cpio.FileMode(info.Mode().Perm()), Links: 1, ModTime: time.Unix(0, 0), Inode: ino}
		var body []byte
		switch {
		case d.IsDir():
			h.Mode |= cpio.TypeDir
			h.Links = 2
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Mode |= cpio.TypeSymlink
			body = []byte(target)
		case d.Type().IsRegular():
			h.Mode |= cpio.TypeReg
			if body, err = os.ReadFile(p); err != nil {
				return err
			}
		default:
			return nil
		}
		h.Size = int64(len(body))
		if err := w.WriteHeader(h); err != nil {
			return fmt.Errorf("initramfs %s: %w", rel, err)
		}
		_, err = w.Write(body)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// buildCloudInit writes out/cloudinit.img, a disk as disk.img whose
// initramfs is initrd followed by the cloud-init tree (cloudInitTree,
// treeArchive) and whose kernel command line says converge.cloudinit=run,
// then out/cloudinit.stamp (st). tmp is the build's scratch directory,
// tools the root holding the diskPackages.
func buildCloudInit(out, tmp, tools string, kernel, initrd []byte, pkgs map[string]string, st string) error {
	dir := filepath.Join(tmp, "cloudinit")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := cloudInitTree(dir, pkgs)
	if err != nil {
		return err
	}
	tree, err := treeArchive(root)
	if err != nil {
		return err
	}
	img, err := diskImage(tools, filepath.Join(dir, "disk"), kernel, append(append([]byte{}, initrd...), tree...), cloudInitSyslinux())
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(out, "cloudinit.stamp")); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := copyFile(img, filepath.Join(out, "cloudinit.img")); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(out, "cloudinit.stamp"), []byte(st))
}
