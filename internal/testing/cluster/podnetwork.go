package cluster

import "path/filepath"

// PodNetworkDirs are where the cluster's container runtime keeps its pod
// network: the CNI configuration directory, the plugin directory and
// host-local's lease directory, absolute host paths. converge's VM agent
// must read the same ones (the HyperConverged's
// converge.dev/pod-network-*-dir annotations, schema
// #PodNetworkAnnotations).
type PodNetworkDirs struct {
	ConfDir, BinDir, LeaseDir string
}

// podNetworkDirs gives the pod network directories of a cluster whose
// work directory is dir and whose binaries are in bin.
func podNetworkDirs(dir, bin string) PodNetworkDirs {
	return PodNetworkDirs{
		ConfDir:  filepath.Join(dir, "cni", "net.d"),
		BinDir:   filepath.Join(bin, "cni"),
		LeaseDir: filepath.Join(dir, "cni", "ipam"),
	}
}

// PodNetwork gives where the running cluster's runtime keeps its pod
// network (below Dir, and the CNI plugins of the binaries directory).
func (c *Cluster) PodNetwork() PodNetworkDirs {
	c.stMu.Lock()
	defer c.stMu.Unlock()
	return podNetworkDirs(c.st.Dir, c.st.BinDir)
}
