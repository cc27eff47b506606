package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cniResultsDir is the result cache of containerd's CNI library (libcni's
// default cache directory, which containerd 1.6 does not move).
const cniResultsDir = "/var/lib/cni/results"

// flexVolumeDefaultDir is the flexvolume plugin directory the kubelet and
// the controller manager create unless told another (both are).
const flexVolumeDefaultDir = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"

// teardown undoes a Start described by st (possibly partial, possibly by
// a process that died, possibly with only the fields a bare state has):
// every step runs, the errors are joined.
func teardown(st *state, progress io.Writer) error {
	start := time.Now()
	var errs []error
	step := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
		if progress != nil {
			status := "done"
			if err != nil {
				status = "failed: " + err.Error()
			}
			fmt.Fprintf(progress, "cluster: stop: %s %s (%.1fs)\n", what, status, time.Since(start).Seconds())
		}
	}
	// Processes: the recorded ones, then whatever still names the work
	// directory or LockDir (a process recorded too late, containerd's
	// shims), then the pods' processes, which outlive their shims.
	step("killing the recorded processes", killProcs(st.Procs, 10*time.Second))
	step("killing leftover processes naming the work directory or "+LockDir, killProcs(procsMentioning(st.Dir, LockDir), 10*time.Second))
	step("killing the pods' processes", killCgroupProcs(10*time.Second))
	step("unmounting", unmountAll(st.KubeletRootDir, st.Dir, LockDir))
	step("removing the node address "+NodeIP+"/32", removeNodeIP())
	step("removing the bridge "+BridgeName, removeBridge())
	step("removing KUBE-* iptables chains", removeKubeChains())
	step("removing kube-proxy's nftables tables", removeProxyTables())
	if st.Sysctls != nil {
		step("restoring sysctls", restoreSysctls(st.Sysctls))
	}
	step("removing the kubepods cgroups", removeKubepodsCgroups())
	step("removing host files", removeHostFiles(st))
	return errors.Join(errs...)
}

// removeHostFiles removes what the cluster left outside its work
// directory, then the work directory: container log links into it, the
// CNI result cache of its network, containerd's and runc's state, the
// kubelet's root directory (emptied, and removed when Start created it),
// the directories Start created, and LockDir but for the lock file.
func removeHostFiles(st *state) error {
	var errs []error
	if st.Dir != "" {
		if ents, err := os.ReadDir("/var/log/containers"); err == nil {
			for _, e := range ents {
				p := filepath.Join("/var/log/containers", e.Name())
				if target, err := os.Readlink(p); err == nil && within(target, st.Dir) {
					errs = append(errs, ignoreMissing(os.Remove(p)))
				}
			}
		}
	}
	// Result files are named <network>-<sandbox ID>-<interface>: those of
	// our network, and those of containerd's loopback network for our
	// sandboxes (their IDs are the CRI's sandbox directories in our root).
	var sandboxes []string
	if st.Dir != "" {
		sandboxes = sandboxIDs(st.Dir)
	}
	if ents, err := os.ReadDir(cniResultsDir); err == nil {
		for _, e := range ents {
			ours := strings.HasPrefix(e.Name(), NetworkName+"-")
			for _, id := range sandboxes {
				ours = ours || strings.Contains(e.Name(), "-"+id+"-")
			}
			if ours {
				errs = append(errs, ignoreMissing(os.Remove(filepath.Join(cniResultsDir, e.Name()))))
			}
		}
	}
	if st.KubeletRootDir != "" {
		if _, err := os.Stat(filepath.Join(st.KubeletRootDir, kubeletRootMarker)); err == nil {
			if st.wasCreated(st.KubeletRootDir) {
				errs = append(errs, removeAllUnmounted(st.KubeletRootDir))
			} else if ents, err := os.ReadDir(st.KubeletRootDir); err == nil {
				for _, e := range ents {
					errs = append(errs, removeAllUnmounted(filepath.Join(st.KubeletRootDir, e.Name())))
				}
			}
		}
	}
	for _, id := range sandboxes {
		errs = append(errs, ignoreMissing(os.Remove(shimSocket(id))))
	}
	// The other directories Start claimed are shared with whatever else
	// runs here (another containerd, CNI users): only what is empty goes.
	for i := len(st.Created) - 1; i >= 0; i-- {
		if p := st.Created[i]; p != st.KubeletRootDir {
			pruneEmpty(p)
		}
	}
	if ents, err := os.ReadDir(LockDir); err == nil {
		for _, e := range ents {
			if n := e.Name(); n != filepath.Base(lockPath) && n != filepath.Base(ownerPath) {
				errs = append(errs, removeAllUnmounted(filepath.Join(LockDir, n)))
			}
		}
	}
	if st.Dir != "" {
		errs = append(errs, removeWorkDir(st))
	}
	return errors.Join(errs...)
}

// sandboxIDs lists the pod sandboxes of the cluster's containerd, from
// the CRI plugin's directories in its root.
func sandboxIDs(dir string) []string {
	ents, _ := os.ReadDir(filepath.Join(dir, "containerd", "io.containerd.grpc.v1.cri", "sandboxes"))
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// shimSocket is the socket of the shim of a sandbox, as containerd 1.6
// names it (runtime/v2/shim SocketAddress): shimSocketDir/<sha256 of
// "<containerd socket>/k8s.io/<sandbox ID>">.
func shimSocket(sandboxID string) string {
	sum := sha256.Sum256([]byte(filepath.Join(containerdSocket, "k8s.io", sandboxID)))
	return filepath.Join(shimSocketDir, hex.EncodeToString(sum[:]))
}

// pruneEmpty removes the empty directories at and below top, deepest
// first; a directory that holds anything stays.
func pruneEmpty(top string) {
	var dirs []string
	_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i]) // fails, as wanted, when not empty
	}
}

// removeWorkDir removes the work directory when Start made it; otherwise
// empties it, keeping logs/ with KeepLogs.
func removeWorkDir(st *state) error {
	if st.TempDir {
		return removeAllUnmounted(st.Dir)
	}
	ents, err := os.ReadDir(st.Dir)
	if err != nil {
		return ignoreMissing(err)
	}
	var errs []error
	for _, e := range ents {
		if st.KeepLogs && e.Name() == "logs" {
			continue
		}
		errs = append(errs, removeAllUnmounted(filepath.Join(st.Dir, e.Name())))
	}
	return errors.Join(errs...)
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
