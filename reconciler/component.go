package reconciler

import (
	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// CRDsComponent is the component recorded in the inventory for the
// generated CustomResourceDefinitions (graph.Rendered's "crds" stage,
// which belongs to no graph node).
const CRDsComponent = "crds"

// objectComponents maps the inventory ID of every object of r to the
// component that derives it: the graph node's name, or the name of the
// stage for a stage without nodes (CRDsComponent for the CRDs).
func objectComponents(r *graph.Rendered) map[string]string {
	out := map[string]string{}
	for _, st := range r.Stages {
		if len(st.Nodes) == 0 {
			for _, o := range st.Objects {
				out[inventory.ID(o)] = st.Name
			}
		}
	}
	for _, n := range r.Nodes {
		for _, o := range n.Objects {
			out[inventory.ID(o)] = n.Name
		}
	}
	return out
}

// setComponents sets the Component of every entry of inv whose object is
// in byID (objectComponents); other entries (objects no longer rendered,
// kept after a failed apply) keep theirs.
func setComponents(inv *v1alpha1.Inventory, byID map[string]string) {
	if inv == nil {
		return
	}
	for i, e := range inv.Entries {
		if c, ok := byID[e.ID]; ok {
			inv.Entries[i].Component = c
		}
	}
}
