package datavolume

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// PickNode gives the node an import runs on for WaitForFirstConsumer
// storage: among nodes labelled v1alpha1.ImporterNodeLabel=true, Ready and
// not cordoned, the one with the fewest imports and uploads already placed
// (placed maps a node name to its count of DataVolume PVCs, those with
// AnnSource, annotated with AnnSelectedNode; api/datavolume), ties broken
// by name. "" when there is none.
func PickNode(nodes []corev1.Node, placed map[string]int) string {
	var cands []string
	for i := range nodes {
		n := &nodes[i]
		if n.Labels[v1alpha1.ImporterNodeLabel] != "true" || n.Spec.Unschedulable || n.DeletionTimestamp != nil {
			continue
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if ready {
			cands = append(cands, n.Name)
		}
	}
	if len(cands) == 0 {
		return ""
	}
	slices.SortFunc(cands, func(a, b string) int {
		if placed[a] != placed[b] {
			return placed[a] - placed[b]
		}
		if a < b {
			return -1
		}
		return 1
	})
	return cands[0]
}
