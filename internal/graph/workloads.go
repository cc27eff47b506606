package graph

import (
	"encoding/json"
	"fmt"
	"sort"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/token"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/converge-dev/converge/internal/graph/config"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// WorkloadsComponent is the graph component that holds the config's
// workloads (config.WorkloadKinds): it depends on every other component,
// so its stage is the last one and, with health gates, it is applied only
// once the whole stack is healthy.
const WorkloadsComponent = "workloads"

// DefaultWorkloadNamespace is the namespace of a namespaced workload
// whose metadata.namespace is unset, as `kubectl apply -f` places
// KubeVirt's own examples (which name none) and as Argo CD applies such
// an object to its Application's destination namespace. Flux's
// kustomize-controller refuses such objects unless the Kustomization sets
// spec.targetNamespace; a Sync has no target namespace.
const DefaultWorkloadNamespace = "default"

// Health rules (Rendered.Health): how the reconciler judges an object of a
// kind once applied.
const (
	// HealthKstatus: kstatus (github.com/fluxcd/cli-utils) computes
	// readiness; the default for kinds the graph does not list.
	HealthKstatus = "kstatus"
	// HealthConditions: an operand CR's Available/Progressing/Degraded
	// conditions, as HCO aggregates them.
	HealthConditions = "conditions"
	// HealthNone: never judged nor waited on.
	HealthNone = "none"
	// HealthVirtualMachine: Ready, or stopped as its run strategy says
	// (reconciler.VirtualMachineHealth).
	HealthVirtualMachine = "virtualmachine"
	// HealthVirtualMachineInstance: Ready, or Succeeded; Failed on phase
	// Failed (reconciler.VirtualMachineInstanceHealth).
	HealthVirtualMachineInstance = "virtualmachineinstance"
	// HealthDataVolume: Progressing (with status.progress) until phase
	// Succeeded; Failed on phase Failed (reconciler.DataVolumeHealth).
	HealthDataVolume = "datavolume"
	// HealthExists: healthy once the object exists (an instancetype, a
	// network definition: nothing reconciles them).
	HealthExists = "exists"
)

// WorkloadHealth gives the health rule of the workload kinds that do not
// use kstatus; Namespaces, Secrets and ConfigMaps do (a Namespace is
// Current once Active, the others once they exist). The graph's own
// rules (components/graph.cue Health) win for a kind both list.
var WorkloadHealth = map[string]string{
	"VirtualMachine":                    HealthVirtualMachine,
	"VirtualMachineInstance":            HealthVirtualMachineInstance,
	"DataVolume":                        HealthDataVolume,
	"NetworkAttachmentDefinition":       HealthExists,
	"VirtualMachineInstancetype":        HealthExists,
	"VirtualMachineClusterInstancetype": HealthExists,
	"VirtualMachinePreference":          HealthExists,
	"VirtualMachineClusterPreference":   HealthExists,
}

// serverFields are the metadata fields the API server writes; a manifest
// exported from a cluster carries them, and applying them would fail or
// be a precondition on a stale object.
var serverFields = []string{"uid", "resourceVersion", "generation", "selfLink", "managedFields",
	"deletionTimestamp", "deletionGracePeriodSeconds"}

// addWorkloads checks cfg's workloads and adds them to r as the
// WorkloadsComponent node (depending on every other node), then orders r
// again. Every document is checked and every problem reported, each line
// "file:line:col: Kind namespace/name: path: reason" (see checkWorkload and
// prepareWorkload); nothing is added when there is one. A config without
// workloads adds no node.
func (e *Engine) addWorkloads(cfg *config.Config, r *Rendered) error {
	for k, rule := range WorkloadHealth {
		if _, ok := r.Health[k]; !ok {
			r.Health[k] = rule
		}
	}
	if len(cfg.Workloads) == 0 {
		return nil
	}
	obsolete := obsoleteCPUModels(r)
	derived := map[string]string{}
	for _, c := range r.CRDs {
		derived[inventory.ID(c)] = "crds"
	}
	for _, n := range r.Nodes {
		for _, o := range n.Objects {
			derived[inventory.ID(o)] = n.Name
		}
	}
	first := map[string]token.Pos{}
	var lines []string
	var objs []*unstructured.Unstructured
	for _, d := range cfg.Workloads {
		u, raw, probs := prepareWorkload(d)
		subject := workloadSubject(d.Kind, u)
		if len(probs) == 0 {
			probs = checkWorkload(u, raw, obsolete)
		}
		id := inventory.ID(u)
		switch {
		case len(probs) > 0:
		case derived[id] != "":
			probs = []problem{{Reason: fmt.Sprintf("the %s component derives this object from the HyperConverged; a workload may not declare it again", derived[id])}}
		case first[id].IsValid():
			probs = []problem{{Reason: fmt.Sprintf("declared a second time (the first is at %s); a config holds each object once", first[id])}}
		default:
			first[id] = d.Pos
		}
		lines = append(lines, formatProblems(d.Value, subject, probs)...)
		objs = append(objs, u)
	}
	if len(lines) > 0 {
		return &Error{Lines: lines}
	}
	sort.SliceStable(objs, func(i, j int) bool { return namespaceFirst(objs[i]) && !namespaceFirst(objs[j]) })
	var deps []string
	for _, n := range r.Nodes {
		deps = append(deps, n.Name)
	}
	sort.Strings(deps)
	r.Nodes = append(r.Nodes, Node{Name: WorkloadsComponent, DependsOn: deps, Objects: objs})
	return r.order()
}

// namespaceFirst reports whether u is a core Namespace: within the
// workloads node Namespaces come first, as the reconciler applies them
// (before any namespaced object of the same stage).
func namespaceFirst(u *unstructured.Unstructured) bool {
	return u.GetKind() == "Namespace" && u.GroupVersionKind().Group == ""
}

// workloadSubject names the object in messages: "Kind namespace/name" or
// "Kind name".
func workloadSubject(k config.Kind, u *unstructured.Unstructured) string {
	name := u.GetName()
	if name == "" {
		name = "(no name)"
	}
	if u.GetNamespace() != "" {
		return k.Kind + " " + u.GetNamespace() + "/" + name
	}
	return k.Kind + " " + name
}

// prepareWorkload gives document d as the object converge applies, its
// JSON, and the problems of its metadata: the API server's own checks of
// metadata on create (name, namespace, labels, annotations, owner
// references, finalizers: apimachinery's ValidateObjectMetaAccessor), no
// metadata the API server writes (a manifest exported from a cluster:
// metadata.uid, resourceVersion, ...; creationTimestamp: null and an empty
// status, which `kubectl get -o yaml` and KubeVirt's generated examples
// carry, are dropped), no status (the controllers write it), and a
// namespace as its kind's scope requires (DefaultWorkloadNamespace when a
// namespaced object names none).
func prepareWorkload(d config.Document) (*unstructured.Unstructured, []byte, []problem) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	b, err := d.Value.MarshalJSON()
	if err == nil {
		err = utiljson.Unmarshal(b, &u.Object)
	}
	if err != nil {
		return u, nil, []problem{{Reason: err.Error()}}
	}
	var probs []problem
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		for _, f := range serverFields {
			if _, set := md[f]; set {
				probs = append(probs, problem{Path: "metadata." + f, Reason: "written by the API server; remove it from the config (a manifest exported from a cluster?)"})
			}
		}
		if ts, set := md["creationTimestamp"]; set {
			if ts != nil {
				probs = append(probs, problem{Path: "metadata.creationTimestamp", Reason: "written by the API server; remove it from the config (a manifest exported from a cluster?)"})
			}
			delete(md, "creationTimestamp")
		}
	}
	if st, set := u.Object["status"]; set {
		if m, isMap := st.(map[string]any); st != nil && (!isMap || len(m) > 0) {
			probs = append(probs, problem{Path: "status", Reason: "written by the controllers, never applied; remove it from the config"})
		}
		delete(u.Object, "status")
	}
	if d.Kind.Namespaced && u.GetNamespace() == "" {
		u.SetNamespace(DefaultWorkloadNamespace)
	}
	nameFn := apivalidation.NameIsDNSSubdomain
	if d.Kind.Kind == "Namespace" {
		nameFn = apivalidation.ValidateNamespaceName
	}
	for _, fe := range apivalidation.ValidateObjectMetaAccessor(u, d.Kind.Namespaced, nameFn, field.NewPath("metadata")) {
		reason := fe.ErrorBody()
		if fe.Field == "metadata.namespace" && !d.Kind.Namespaced {
			reason = d.Kind.Kind + " is cluster-scoped: remove metadata.namespace"
		}
		probs = append(probs, problem{Path: fe.Field, Reason: reason})
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		probs = append(probs, problem{Reason: err.Error()})
	}
	return u, raw, probs
}

// formatProblems gives one line per problem of the document doc:
// "file:line:col: subject: path: reason", at the deepest field of the
// path the document has (for a field it lacks, where it would go), in
// the order of the positions in the file.
func formatProblems(doc cue.Value, subject string, probs []problem) []string {
	type line struct {
		pos  token.Pos
		text string
	}
	lines := make([]line, 0, len(probs))
	for _, p := range probs {
		pos, found := deepestField(doc, p.Path)
		path := p.Path
		if p.Approx {
			path = found
		}
		text := fmt.Sprintf("%s: %s: ", pos, subject)
		if path != "" {
			text += path + ": "
		}
		lines = append(lines, line{pos, text + p.Reason})
	}
	sort.SliceStable(lines, func(i, j int) bool {
		a, b := lines[i].pos.Position(), lines[j].pos.Position()
		return a.Line < b.Line || (a.Line == b.Line && a.Column < b.Column)
	})
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}

// obsoleteCPUModels gives the CPU models the rendered KubeVirt CR marks
// obsolete (spec.configuration.obsoleteCPUModels, set true): the VM
// validation webhook refuses them.
func obsoleteCPUModels(r *Rendered) map[string]bool {
	out := map[string]bool{}
	for _, n := range r.Nodes {
		for _, o := range n.Objects {
			if o.GetKind() != "KubeVirt" {
				continue
			}
			m, _, _ := unstructured.NestedMap(o.Object, "spec", "configuration", "obsoleteCPUModels")
			for k, v := range m {
				if b, ok := v.(bool); ok && b {
					out[k] = true
				}
			}
		}
	}
	return out
}
