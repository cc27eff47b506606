package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
)

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	dir = filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// mountsUnder lists the mount points at or below any of dirs, deepest
// first.
func mountsUnder(dirs ...string) ([]string, error) {
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		for _, d := range dirs {
			if d != "" && within(m.Mountpoint, d) {
				return false, false
			}
		}
		return true, false
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out, nil
}

// unmountAll unmounts everything at or below dirs (stacked mounts too),
// deepest first, detaching lazily what is busy, until nothing is left.
func unmountAll(dirs ...string) error {
	for round := 0; round < 20; round++ {
		points, err := mountsUnder(dirs...)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			if err := syscall.Unmount(p, 0); err != nil {
				if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
					return fmt.Errorf("unmounting %s: %w", p, err)
				}
			}
		}
	}
	points, _ := mountsUnder(dirs...)
	return fmt.Errorf("mounts left after 20 rounds of unmounting: %s", strings.Join(points, ", "))
}

// removeAllUnmounted removes path and everything below it, refusing (with
// an error) while anything below it is still a mount point, so that no
// removal reaches into a mounted host directory.
func removeAllUnmounted(path string) error {
	points, err := mountsUnder(path)
	if err != nil {
		return err
	}
	if len(points) > 0 {
		return fmt.Errorf("not removing %s: still mounted below it: %s", path, strings.Join(points, ", "))
	}
	return os.RemoveAll(path)
}

// cgroupMounts gives the mount points of the cgroup (v1) and cgroup2
// hierarchies.
func cgroupMounts() ([]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	return out, nil
}

// kubepodsCgroups gives the kubelet's kubepods cgroup directory in every
// hierarchy where it exists.
func kubepodsCgroups() []string {
	roots, err := cgroupMounts()
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range roots {
		d := filepath.Join(r, "kubepods")
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// cgroupTree lists dir and its cgroups below, deepest first.
func cgroupTree(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

// killCgroupProcs kills every process in the kubepods cgroups (the pods'
// containers, which outlive their killed shims) and waits up to timeout
// for them to be gone.
func killCgroupProcs(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n := 0
		for _, top := range kubepodsCgroups() {
			for _, cg := range cgroupTree(top) {
				b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
				if err != nil {
					continue
				}
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						if _, ok := startTime(pid); ok {
							n++
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
			}
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes left in the kubepods cgroups after %s", n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeKubepodsCgroups removes the kubepods cgroups, deepest first.
func removeKubepodsCgroups() error {
	var errs []error
	for _, top := range kubepodsCgroups() {
		for _, cg := range cgroupTree(top) {
			if err := syscall.Rmdir(cg); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", cg, err))
			}
		}
	}
	return errors.Join(errs...)
}
