package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cleanupPrevious undoes what a previous Start left, found through
// owner.json, refusing while a detached cluster still runs; with no owner
// record it removes what it can identify as a cluster's by name alone.
func (c *Cluster) cleanupPrevious() error {
	o, err := readOwner()
	if err != nil {
		return err
	}
	if o != nil {
		prev, err := loadState(o.Dir)
		if err != nil {
			return err
		}
		if prev != nil && o.Detached && anyAlive(prev.Procs) {
			return fmt.Errorf("cluster: %w: started by %s; stop it with `make cluster-stop` (or cluster.StopRunning)", ErrRunning, o)
		}
		c.progress("cleaning up after a previous cluster (%s)", o)
		if prev == nil {
			prev = bareState(c.opts.KubeletRootDir)
			prev.Dir = o.Dir
		}
		if err := teardown(prev, c.opts.Progress); err != nil {
			return fmt.Errorf("cluster: cleaning up after the previous cluster in %s: %w", o.Dir, err)
		}
		if err := os.Remove(ownerPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := checkForeignKubelet(); err != nil {
		return err
	}
	if leftovers() {
		c.progress("removing leftovers of an unrecorded cluster (address %s, bridge %s, kubepods cgroups, processes using %s)", NodeIP, BridgeName, LockDir)
		if err := teardown(bareState(c.opts.KubeletRootDir), c.opts.Progress); err != nil {
			return fmt.Errorf("cluster: removing leftovers: %w", err)
		}
	}
	return nil
}

// leftovers reports whether anything of a cluster is on the host.
func leftovers() bool {
	if nodeIPPresent() || linkExists(BridgeName) || len(kubepodsCgroups()) > 0 || len(procsMentioning(LockDir)) > 0 {
		return true
	}
	m, _ := mountsUnder(LockDir)
	return len(m) > 0
}

// checkForeignKubelet fails when a kubelet that is not a cluster's of
// this package runs here (its pods' cgroups and mounts are not ours to
// clean, and two kubelets cannot share the host).
func checkForeignKubelet() error {
	ours := map[int]bool{}
	for _, p := range procsMentioning(LockDir) {
		ours[p.PID] = true
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || ours[pid] {
			continue
		}
		if _, live := startTime(pid); !live {
			continue // gone, or a zombie waiting for its parent
		}
		if comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); err == nil && strings.TrimSpace(string(comm)) == "kubelet" {
			return fmt.Errorf("cluster: another kubelet runs on this machine (pid %d: %s), not one of this package's clusters: stop it first", pid, cmdlineOf(pid))
		}
	}
	return nil
}

// bareState describes a cluster without a record, for cleaning up what
// can be told ours by name: the kubelet root directory only when it
// carries our marker.
func bareState(kubeletRoot string) *state {
	st := &state{}
	if _, err := os.Stat(filepath.Join(kubeletRoot, kubeletRootMarker)); err == nil {
		st.KubeletRootDir = kubeletRoot
	}
	return st
}

// anyAlive reports whether one of ps still runs.
func anyAlive(ps []proc) bool {
	for _, p := range ps {
		if p.alive() {
			return true
		}
	}
	return false
}

// prepareDir makes the work directory (fresh), the state record and the
// owner record, and claims the host directories the daemons will create.
func (c *Cluster) prepareDir() error {
	o := c.opts
	st := &state{BinDir: o.BinDir, NodeName: o.NodeName, KubeletRootDir: filepath.Clean(o.KubeletRootDir), KeepLogs: o.KeepLogs}
	if err := checkKubeletRoot(st.KubeletRootDir); err != nil {
		return err
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "converge-cluster-")
		if err != nil {
			return err
		}
		st.Dir, st.TempDir = d, true
	} else {
		d, err := filepath.Abs(o.Dir)
		if err != nil {
			return err
		}
		if err := emptyWorkDir(d); err != nil {
			return err
		}
		st.Dir = d
	}
	c.st, c.Dir = st, st.Dir
	if err := os.MkdirAll(filepath.Join(st.Dir, "logs"), 0o755); err != nil {
		return err
	}
	if err := st.save(); err != nil {
		return err
	}
	if err := writeOwner(selfOwner(st.Dir)); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	for _, p := range []string{st.KubeletRootDir, shimSocketDir, "/var/log/containers", cniResultsDir, flexVolumeDefaultDir} {
		if err := st.claim(p); err != nil {
			return err
		}
	}
	saved, err := readSysctls()
	if err != nil {
		return err
	}
	st.Sysctls = saved
	return st.save()
}

// kubeletRootMarker marks a kubelet root directory as this package's.
const kubeletRootMarker = ".converge-cluster"

// checkKubeletRoot refuses a non-empty kubelet root directory without our
// marker (someone else's kubelet state), and writes the marker.
func checkKubeletRoot(dir string) error {
	ents, err := os.ReadDir(dir)
	if err == nil && len(ents) > 0 {
		if _, err := os.Stat(filepath.Join(dir, kubeletRootMarker)); err != nil {
			return fmt.Errorf("cluster: the kubelet root directory %s is not empty and is not this package's (no %s): move it away or set Options.KubeletRootDir", dir, kubeletRootMarker)
		}
		if err := unmountAll(dir); err != nil {
			return err
		}
		for _, e := range ents {
			if err := removeAllUnmounted(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// emptyWorkDir makes dir exist and be empty; a non-empty dir must hold a
// cluster's state.json (it is then the work directory of a cluster
// already stopped or cleaned up).
func emptyWorkDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return nil
	}
	prev, err := loadState(dir)
	if err != nil {
		return err
	}
	if prev == nil {
		onlyLogs := len(ents) == 1 && ents[0].Name() == "logs"
		if !onlyLogs {
			return fmt.Errorf("cluster: work directory %s is not empty and holds no cluster state (state.json): choose another Options.Dir", dir)
		}
	} else if anyAlive(prev.Procs) {
		if err := teardown(prev, nil); err != nil {
			return err
		}
	}
	if err := unmountAll(dir); err != nil {
		return err
	}
	for _, e := range ents {
		if err := removeAllUnmounted(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
