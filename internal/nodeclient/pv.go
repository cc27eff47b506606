package nodeclient

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// NodeOfPV gives the node a node-local PV lives on, whose agent serves
// its uploads: the first value of a required node affinity term on
// v1alpha1.HostpathTopologyKey (the hostpath CSI driver's) or
// kubernetes.io/hostname with operator In; "" when there is none.
func NodeOfPV(pv *corev1.PersistentVolume) string {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return ""
	}
	for _, term := range na.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if (e.Key == v1alpha1.HostpathTopologyKey || e.Key == corev1.LabelHostname) && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) > 0 {
				return e.Values[0]
			}
		}
	}
	return ""
}
