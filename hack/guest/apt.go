package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

const (
	kernelMeta = "linux-image-cloud-amd64"
	busyboxPkg = "busybox-static"
)

// diskPackages are the Debian packages that make the bootable disk: the
// FAT file system (dosfstools' mkfs.fat), its files (mtools' mcopy) and
// SYSLINUX in its boot sector (syslinux's installer, which runs mtools;
// syslinux-common has the rest of SYSLINUX, kept in the stamp so a new
// release rebuilds the disk).
var diskPackages = []string{"syslinux", "syslinux-common", "mtools", "dosfstools"}

// debs are the packages the guest is built from, with the versions apt
// gives.
type debs struct {
	// kernel is the linux-image-<abi>-cloud-amd64 package.
	kernel, kernelVersion string
	// versions are busybox-static's and the diskPackages' versions.
	versions map[string]string
}

// toolNames are the packages besides the kernel, in stamp order.
func toolNames() []string { return append([]string{busyboxPkg}, diskPackages...) }

// specs gives the name=version of every package, kernel first, for apt-get
// download.
func (d debs) specs() []string {
	out := []string{d.kernel + "=" + d.kernelVersion}
	for _, n := range toolNames() {
		out = append(out, n+"="+d.versions[n])
	}
	return out
}

// packages gives the cloud kernel package and version to use and the
// versions of the other packages, from one apt-cache call (apt-cache
// rebuilds its cache on each call where Docker's apt config disables it,
// about 1 s): the kernel is the one the linux-image-cloud-amd64
// metapackage depends on. Without the metapackage, it is the last
// linux-image-<abi>-cloud-amd64 apt-cache search lists.
func packages() (debs, error) {
	d := debs{versions: map[string]string{}}
	show, err := run("", "apt-cache", append([]string{"show", "--no-all-versions", kernelMeta}, toolNames()...)...)
	if err != nil {
		// apt-cache show fails when one of them is unknown: ask separately
		for _, n := range toolNames() {
			if d.versions[n], err = candidate(n); err != nil {
				return debs{}, err
			}
		}
		if d.kernel, err = searchKernel(); err != nil {
			return debs{}, err
		}
		d.kernelVersion, err = candidate(d.kernel)
		return d, err
	}
	fields := stanzas(show)
	for _, n := range toolNames() {
		if d.versions[n] = fields[n]["Version"]; d.versions[n] == "" {
			return debs{}, fmt.Errorf("apt-cache show %s: no Version field, got:\n%s", n, show)
		}
	}
	for _, dep := range strings.Split(fields[kernelMeta]["Depends"], ",") {
		name, constraint, _ := strings.Cut(strings.TrimSpace(dep), " ")
		if strings.HasPrefix(name, "linux-image-") && strings.HasSuffix(name, "-cloud-amd64") {
			d.kernel = name
			if v, ok := strings.CutPrefix(strings.Trim(constraint, "()"), "= "); ok {
				d.kernelVersion = v
			}
		}
	}
	if d.kernel == "" {
		return debs{}, fmt.Errorf("apt-cache show %s: expected a Depends on linux-image-<abi>-cloud-amd64, got:\n%s", kernelMeta, show)
	}
	if d.kernelVersion == "" {
		d.kernelVersion, err = candidate(d.kernel)
	}
	return d, err
}

// stanzas parses apt-cache show output into fields per package.
func stanzas(out string) map[string]map[string]string {
	all := map[string]map[string]string{}
	var cur map[string]string
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, ": ")
		if !ok || strings.HasPrefix(l, " ") {
			continue
		}
		if k == "Package" {
			cur = map[string]string{}
			all[v] = cur
		} else if cur != nil {
			cur[k] = strings.TrimSpace(v)
		}
	}
	return all
}

// searchKernel gives the last linux-image-<abi>-cloud-amd64 package
// apt-cache search lists.
func searchKernel() (string, error) {
	list, err := run("", "apt-cache", "search", "--names-only", `^linux-image-[0-9].*-cloud-amd64$`)
	if err != nil {
		return "", err
	}
	var names []string
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("apt: no %s and no linux-image-<abi>-cloud-amd64 package known (apt-get update?)", kernelMeta)
	}
	sort.Strings(names)
	return names[len(names)-1], nil
}

// candidate gives the version apt would install of pkg.
func candidate(pkg string) (string, error) {
	out, err := run("", "apt-cache", "show", "--no-all-versions", pkg)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "Version: "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("apt-cache show %s: no Version field", pkg)
}

// run runs a command in dir and gives its standard output; the error
// quotes the command and its standard error.
func run(dir, name string, args ...string) (string, error) {
	return runEnv(dir, nil, name, args...)
}

// runEnv is run with env added to the process's environment.
func runEnv(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(cmd.Environ(), env...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
