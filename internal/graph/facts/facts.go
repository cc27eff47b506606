// Package facts gives the cluster facts that change converge's derived
// output (schema #ClusterFacts): read from a YAML file for the CLI, or
// discovered from the live cluster by the controller, as HCO
// pkg/internal/nodeinfo and pkg/util/cluster.go do.
package facts

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TektonTask is the kind whose being served makes the tektonPipelines
// fact true.
var TektonTask = schema.GroupVersionKind{Group: "tekton.dev", Version: "v1", Kind: "Task"}

var controlPlaneLabels = []string{
	"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master", "node-role.kubevirt.io/control-plane",
}

// Discover reads the facts from the cluster: node counts by role (a node
// with a control-plane or master role label is a control-plane node,
// every other node a worker), their kubernetes.io/arch labels, and
// whether the OpenShift config API (config.openshift.io APIServer) is
// served, in which case its cluster TLS profile is taken too, and whether
// Tekton's tekton.dev/v1 Task is (tektonPipelines).
func Discover(ctx context.Context, c client.Reader, mapper meta.RESTMapper) (map[string]any, error) {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("facts: listing nodes: %w", err)
	}
	cp, workers := 0, 0
	cpArch, wArch := map[string]bool{}, map[string]bool{}
	for _, n := range nodes.Items {
		arch := n.Labels["kubernetes.io/arch"]
		if isControlPlane(n.Labels) {
			cp++
			if arch != "" {
				cpArch[arch] = true
			}
		} else {
			workers++
			if arch != "" {
				wArch[arch] = true
			}
		}
	}
	f := map[string]any{"platform": "kubernetes", "controlPlaneNodes": cp, "workerNodes": workers}
	if a := keys(cpArch); len(a) > 0 {
		f["controlPlaneArchitectures"] = a
	}
	if a := keys(wArch); len(a) > 0 {
		f["workloadArchitectures"] = a
	}
	if _, err := mapper.RESTMapping(TektonTask.GroupKind(), TektonTask.Version); err == nil {
		f["tektonPipelines"] = true
	}
	apiServer := schema.GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "APIServer"}
	if _, err := mapper.RESTMapping(apiServer.GroupKind(), apiServer.Version); err == nil {
		f["platform"] = "openshift"
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(apiServer)
		if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, u); err == nil {
			if p, ok, _ := unstructured.NestedMap(u.Object, "spec", "tlsSecurityProfile"); ok {
				f["apiServerTLSSecurityProfile"] = p
			}
		}
	}
	return f, nil
}

func isControlPlane(labels map[string]string) bool {
	for _, l := range controlPlaneLabels {
		if _, ok := labels[l]; ok {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []any {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
