package hppoperator

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeGVK is the Node kind: the pool workers' input, watched so that a
// node joining or leaving the HostPathProvisioner's placement re-derives
// its workers.
var NodeGVK = schema.GroupVersionKind{Version: "v1", Kind: "Node"}

// readInputs gives the #Roles inputs of cr: nodes, the names of the nodes
// its pool workers run on (PoolNodes), read through r.
func readInputs(ctx context.Context, r client.Reader, cr *unstructured.Unstructured) (map[string]any, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(NodeGVK.GroupVersion().WithKind("NodeList"))
	if err := r.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing the Nodes: %w", err)
	}
	nodes := make([]corev1.Node, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &nodes[i]); err != nil {
			return nil, fmt.Errorf("Node %s: %w", list.Items[i].GetName(), err)
		}
	}
	names, err := PoolNodes(cr, nodes)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = n
	}
	return map[string]any{"nodes": out}, nil
}

// workload is the HostPathProvisioner's spec.workload fields that place
// its pods (hostpath-provisioner-operator api/v1beta1 NodePlacement).
type workload struct {
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	Affinity     *corev1.Affinity  `json:"affinity,omitempty"`
}

// PoolNodes gives, sorted, the names of the nodes among nodes that cr's
// spec.workload selects (its nodeSelector and its required node
// affinity, as the scheduler and the DaemonSet controller match them,
// k8s.io/component-helpers nodeaffinity): the nodes the hostpath-csi
// DaemonSet is placed on, which get a storage pool worker per pvcTemplate
// pool. Upstream takes the nodes the CSI DaemonSet's pods run on
// (hostpath-provisioner-operator pkg/controller/hostpathprovisioner
// storagepool.go getNodesByDaemonSet, commit
// 03d4d6711f6acf9aaa79a5e492ee7d60b91c31b2); converge takes the placement
// itself, without taints, so that a node tainted, cordoned or not ready
// for a while keeps its worker and its PVC (a worker that cannot be
// scheduled shows as a pending pod in the CR's Progressing condition;
// a node leaving the placement has its PVC deleted). A spec.workload that
// does not decode is an error naming it.
func PoolNodes(cr *unstructured.Unstructured, nodes []corev1.Node) ([]string, error) {
	var w workload
	if raw, found, _ := unstructured.NestedFieldNoCopy(cr.Object, "spec", "workload"); found {
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("HostPathProvisioner %s: spec.workload: expected an object", cr.GetName())
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &w); err != nil {
			return nil, fmt.Errorf("HostPathProvisioner %s: spec.workload: %w", cr.GetName(), err)
		}
	}
	placement := nodeaffinity.NewRequiredNodeAffinity(w.NodeSelector, w.Affinity)
	out := []string{}
	for i := range nodes {
		ok, err := placement.Match(&nodes[i])
		if err != nil {
			return nil, fmt.Errorf("HostPathProvisioner %s: spec.workload.affinity: %w", cr.GetName(), err)
		}
		if ok {
			out = append(out, nodes[i].Name)
		}
	}
	sort.Strings(out)
	return out, nil
}
