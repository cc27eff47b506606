package scheduler

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// CPUAllocationRatio is KubeVirt's default cpuAllocationRatio: a VMI with
// no CPU request asks for one tenth of a CPU per vCPU, as KubeVirt's
// virt-launcher pod does (pkg/virt-controller/services/renderresources.go).
const CPUAllocationRatio = 10

// Ratios are KubeVirt's developerConfiguration settings that turn a VMI
// without requests into requests (kubevirt
// pkg/virt-controller/services/renderresources.go: cpu = vCPUs /
// cpuAllocationRatio; pkg/virt-api webhooks mutators: memory = guest
// memory × 100 / memoryOvercommit).
type Ratios struct {
	// CPUAllocationRatio: a VMI without a CPU request asks for
	// vCPUs/CPUAllocationRatio CPUs.
	CPUAllocationRatio int
	// MemoryOvercommit is a percentage: a VMI without a memory request
	// asks for its guest memory × 100 / MemoryOvercommit.
	MemoryOvercommit int
}

// DefaultRatios are KubeVirt's defaults: cpuAllocationRatio 10,
// memoryOvercommit 100.
func DefaultRatios() Ratios {
	return Ratios{CPUAllocationRatio: CPUAllocationRatio, MemoryOvercommit: 100}
}

// Placed is a VMI already bound to a node, with what it requests.
type Placed struct {
	Node     string
	Requests corev1.ResourceList
}

// Decision is the result of Schedule: Node is the chosen node, or "" when
// no node fits, and then Message says why each node was rejected, as
// kube-scheduler says it ("0/3 nodes are available: 1 node(s) didn't match
// VMI's node selector, 2 Insufficient memory.").
type Decision struct {
	Node    string
	Message string
}

// Requests is RequestsWith KubeVirt's DefaultRatios.
func Requests(vmi *kubevirtv1.VirtualMachineInstance, extra corev1.ResourceList) corev1.ResourceList {
	return RequestsWith(vmi, extra, DefaultRatios())
}

// RequestsWith gives what vmi asks of a node: cpu and memory from
// spec.domain.resources.requests, else vCPUs/r.CPUAllocationRatio and
// spec.domain.memory.guest × 100 / r.MemoryOvercommit; plus extra (e.g.
// one bridge.network.kubevirt.io/<bridge> per bridge interface), added as
// is. A ratio below 1 counts as its default.
func RequestsWith(vmi *kubevirtv1.VirtualMachineInstance, extra corev1.ResourceList, r Ratios) corev1.ResourceList {
	if r.CPUAllocationRatio < 1 {
		r.CPUAllocationRatio = CPUAllocationRatio
	}
	if r.MemoryOvercommit < 1 {
		r.MemoryOvercommit = 100
	}
	out := corev1.ResourceList{}
	d := vmi.Spec.Domain
	if q, ok := d.Resources.Requests[corev1.ResourceCPU]; ok {
		out[corev1.ResourceCPU] = q
	} else {
		vcpus := int64(1)
		if c := d.CPU; c != nil {
			vcpus = int64(max(c.Cores, 1)) * int64(max(c.Sockets, 1)) * int64(max(c.Threads, 1))
		}
		out[corev1.ResourceCPU] = *resource.NewMilliQuantity(vcpus*1000/int64(r.CPUAllocationRatio), resource.DecimalSI)
	}
	if q, ok := d.Resources.Requests[corev1.ResourceMemory]; ok {
		out[corev1.ResourceMemory] = q
	} else if d.Memory != nil && d.Memory.Guest != nil {
		mem := *d.Memory.Guest
		if r.MemoryOvercommit != 100 {
			mem = *resource.NewQuantity(mem.Value()*100/int64(r.MemoryOvercommit), resource.BinarySI)
		}
		out[corev1.ResourceMemory] = mem
	}
	for k, q := range extra {
		sum := out[k]
		sum.Add(q)
		out[k] = sum
	}
	return out
}

// Schedule picks a node for vmi, which requests requests, among nodes (the
// candidates: the nodes running the agent), given the VMIs already placed.
// A node is rejected when it is cordoned (spec.unschedulable), labelled
// kubevirt.io/schedulable=false (its agent is unresponsive), does not
// match spec.nodeSelector or the required node affinity, has a NoSchedule
// or NoExecute taint vmi does not tolerate, or lacks a requested resource
// in status.allocatable minus what placed VMIs request there. Among the
// nodes that fit, the one with the largest free share of cpu plus memory
// after placement wins (kube-scheduler's LeastAllocated), then the
// smallest name.
func Schedule(vmi *kubevirtv1.VirtualMachineInstance, requests corev1.ResourceList, nodes []corev1.Node, placed []Placed) Decision {
	return ScheduleWithClaims(vmi, requests, nodes, placed, nil)
}

// ScheduleWithClaims is Schedule for a VMI whose volumes use claims
// (Claims): unbound immediate claims make it unschedulable on every node,
// and a node that passes the other checks is rejected when a claim's
// volume cannot be used there (Claims.reject: the PersistentVolume's node
// affinity, the selected node or the StorageClass's allowedTopologies of
// a WaitForFirstConsumer claim), as kube-scheduler's VolumeBinding plugin
// does after the resource fit.
func ScheduleWithClaims(vmi *kubevirtv1.VirtualMachineInstance, requests corev1.ResourceList, nodes []corev1.Node, placed []Placed, claims Claims) Decision {
	if len(nodes) == 0 {
		return Decision{Message: fmt.Sprintf("0/0 nodes are available: no node runs the converge VM agent (label %s=true).", v1alpha1.AgentLabel)}
	}
	if names := claims.unboundImmediate(); len(names) > 0 {
		return Decision{Message: unboundImmediateMessage(len(nodes), names)}
	}
	used := map[string]corev1.ResourceList{}
	for _, p := range placed {
		u := used[p.Node]
		if u == nil {
			u = corev1.ResourceList{}
			used[p.Node] = u
		}
		for k, q := range p.Requests {
			s := u[k]
			s.Add(q)
			u[k] = s
		}
	}
	var affinity *nodeaffinity.LazyErrorNodeSelector
	if a := vmi.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		affinity = nodeaffinity.NewLazyErrorNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	reasons := map[string]int{}
	best, bestScore := "", -1.0
	for i := range nodes {
		n := &nodes[i]
		why := reject(vmi, requests, n, used[n.Name], affinity)
		if r := claims.reject(n); len(why) == 0 && r != "" {
			why = []string{r}
		}
		if len(why) > 0 {
			for _, r := range why {
				reasons[r]++
			}
			continue
		}
		s := score(requests, n, used[n.Name])
		if s > bestScore || (s == bestScore && n.Name < best) {
			best, bestScore = n.Name, s
		}
	}
	if best != "" {
		return Decision{Node: best}
	}
	var parts []string
	for r, c := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", c, r))
	}
	sort.Strings(parts)
	return Decision{Message: fmt.Sprintf("0/%d nodes are available: %s.", len(nodes), strings.Join(parts, ", "))}
}

// reject gives the reasons n cannot take vmi (none: it fits).
func reject(vmi *kubevirtv1.VirtualMachineInstance, requests corev1.ResourceList, n *corev1.Node, used corev1.ResourceList, affinity *nodeaffinity.LazyErrorNodeSelector) []string {
	if n.Spec.Unschedulable {
		return []string{"node(s) were unschedulable"}
	}
	if n.Labels[kubevirtv1.NodeSchedulable] == "false" {
		return []string{"node(s) had an unresponsive VM agent"}
	}
	if len(vmi.Spec.NodeSelector) > 0 && !labels.SelectorFromSet(vmi.Spec.NodeSelector).Matches(labels.Set(n.Labels)) {
		return []string{"node(s) didn't match VMI's node affinity/selector"}
	}
	if affinity != nil {
		if ok, err := affinity.Match(n); err != nil || !ok {
			return []string{"node(s) didn't match VMI's node affinity/selector"}
		}
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(vmi.Spec.Tolerations, t) {
			return []string{fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)}
		}
	}
	var out []string
	for name, want := range requests {
		if want.IsZero() {
			continue
		}
		free, ok := allocatable(n)[name]
		if !ok {
			out = append(out, "Insufficient "+string(name))
			continue
		}
		free = free.DeepCopy()
		if u, ok := used[name]; ok {
			free.Sub(u)
		}
		if free.Cmp(want) < 0 {
			out = append(out, "Insufficient "+string(name))
		}
	}
	return out
}

func tolerated(tolerations []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), t, false) {
			return true
		}
	}
	return false
}

// score is the free share of cpu and memory left on n after placing
// requests (0–2; higher is emptier).
func score(requests corev1.ResourceList, n *corev1.Node, used corev1.ResourceList) float64 {
	var s float64
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		alloc, ok := allocatable(n)[name]
		if !ok || alloc.IsZero() {
			continue
		}
		u := used[name].DeepCopy()
		u.Add(requests[name])
		s += 1 - float64(u.MilliValue())/float64(alloc.MilliValue())
	}
	return s
}

// allocatable gives what n offers VMs: status.allocatable with
// v1alpha1.AllocatableAnnotation's entries on top.
func allocatable(n *corev1.Node) corev1.ResourceList {
	a, ok := n.Annotations[v1alpha1.AllocatableAnnotation]
	if !ok {
		return n.Status.Allocatable
	}
	var over corev1.ResourceList
	if err := json.Unmarshal([]byte(a), &over); err != nil {
		return n.Status.Allocatable
	}
	out := n.Status.Allocatable.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	maps.Copy(out, over)
	return out
}
