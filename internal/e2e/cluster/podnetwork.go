package cluster

import (
	"fmt"
	"strings"
)

// The HyperConverged annotations that place the VM agent's view of the
// node's pod network (schema #PodNetworkAnnotations; README, "the pod
// network with masquerade").
const (
	PodNetworkConfDirAnnotation  = "converge.dev/pod-network-conf-dir"
	PodNetworkBinDirAnnotation   = "converge.dev/pod-network-bin-dir"
	PodNetworkLeaseDirAnnotation = "converge.dev/pod-network-lease-dir"
)

// WithPodNetwork takes a HyperConverged manifest and its namespace and
// gives it with the annotations naming the local cluster's pod network
// directories (its runtime keeps them in its work directory, not in
// /etc/cni/net.d), added after the metadata's "  namespace: <namespace>"
// line, as a user edits the file. The error says the line is missing.
func (e *Env) WithPodNetwork(hc, namespace string) (string, error) {
	anchor := "  namespace: " + namespace + "\n"
	if !strings.Contains(hc, anchor) {
		return "", fmt.Errorf("HyperConverged: no %q line to add the pod network annotations after", strings.TrimSpace(anchor))
	}
	pn := e.Cluster.PodNetwork()
	ann := fmt.Sprintf("  annotations:\n    %s: %s\n    %s: %s\n    %s: %s\n",
		PodNetworkConfDirAnnotation, pn.ConfDir, PodNetworkBinDirAnnotation, pn.BinDir, PodNetworkLeaseDirAnnotation, pn.LeaseDir)
	return strings.Replace(hc, anchor, anchor+ann, 1), nil
}
