package noderestriction_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/nodeplane/endpoint"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
)

// The policies' messages (components/common #NodeRestriction, and each
// component's own rules).
const (
	notOwnNode     = "may change only its own Node, the node of its Pod"
	noNode         = "the request names no node"
	foreignLabel   = "may add, change or remove only its own Node labels"
	foreignAnno    = "may add, change or remove only its own Node annotations"
	nodeSpec       = "may not change its Node's spec"
	nodeMeta       = "may not change its Node's metadata other than its own labels and annotations"
	nodeStatus     = "may change only its own Node status"
	otherVMI       = "may change only the VMIs scheduled on its node (status.nodeName)"
	otherPV        = "may create, change or delete only the PersistentVolumes of kubevirt.io.hostpath-provisioner on its node"
	pvFinalizers   = "may change only the finalizers of a PersistentVolume"
	otherPVC       = "may only remove volume.kubernetes.io/selected-node from the PersistentVolumeClaims selected for its node"
	otherPVCStatus = "may write only the status of the PersistentVolumeClaims selected for its node"
	rbacForbidden  = "cannot patch resource"
)

// step is one request of an agent: do must succeed (want "") or fail with
// an error containing want.
type step struct {
	name string
	do   func(ctx context.Context) error
	want string
}

// TestNodeRestriction acts as each node agent with a token bound to its
// Pod on nodeA (the VM agent also on nodeB, and once with a token bound to
// nothing) and checks that the agent's own calls on its node pass and that
// every write to another node, another node's VMIs, PVs, PVCs or
// VolumeSnapshotContents, or to
// what the agent does not own on its own Node is refused with the
// policy's message.
func TestNodeRestriction(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	vmA, vmACfg := e.agent(t, vmAgent, nodeA)
	vmB, _ := e.agent(t, vmAgent, nodeB)
	vmNone, _ := e.agent(t, vmAgent, "")
	bmA, _ := e.agent(t, bridgeMarker, nodeA)
	ciA, _ := e.agent(t, cdiImporter, nodeA)
	hpA, _ := e.agent(t, hostpathCSI, nodeA)

	// Each policy is in force (RBAC and policies reach the API server's
	// informers a moment after they are applied).
	for _, c := range []client.Client{vmA, ciA} {
		enforced(t, notOwnNode, func() error {
			return mergePatch(ctx, c, node(nodeB), `{"metadata":{"labels":{"canary":"x"}}}`, client.DryRunAll)
		})
	}
	enforced(t, notOwnNode, func() error {
		return statusPatch(ctx, bmA, node(nodeB), `{"status":{"capacity":{"bridge.network.kubevirt.io/canary":"1"}}}`, client.DryRunAll)
	})
	enforced(t, otherPV, func() error {
		return hpA.Create(ctx, pv("canary", "kubevirt.io.hostpath-provisioner", nodeB), client.DryRunAll)
	})

	vmiA := vmi(t, e, "on-a", nodeA)
	vmiB := vmi(t, e, "on-b", nodeB)
	src, err := agent.NewAPISource(vmACfg, e.scheme, agent.DefaultAPIOptions(nodeA))
	must(t, err)
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	must(t, src.Start(sctx))

	pvA, pvB := pv("pv-a", "kubevirt.io.hostpath-provisioner", nodeA), pv("pv-b", "kubevirt.io.hostpath-provisioner", nodeB)
	must(t, e.admin.Create(ctx, pvB))
	pvcA, pvcB, pvcD := pvc(t, e, "claim-a", nodeA), pvc(t, e, "claim-b", nodeB), pvc(t, e, "claim-d", nodeA)

	kvm := corev1.NodeCondition{Type: v1alpha1.KVMCondition, Status: corev1.ConditionTrue, Reason: "KVMAvailable", Message: "/dev/kvm opened"}
	register := func(name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			o := agent.DefaultNodeOptions(name)
			o.Conditions = []corev1.NodeCondition{kvm}
			return agent.RegisterNode(ctx, vmA, o)
		}
	}
	cert := strings.Repeat("ab", 32)
	steps := []step{
		// The VM agent: what it does on its own Node (RegisterNode creates
		// the Node, which exists, then patches labels, annotations and the
		// KVM condition; the console server publishes its endpoint).
		{"vm-agent registers its own Node", register(nodeA), ""},
		{"vm-agent publishes its console on its own Node", func(ctx context.Context) error {
			return endpoint.Publish(ctx, vmA, nodeendpoint.Console, nodeA, nodeendpoint.Endpoint{Address: "10.0.0.1:8186", CertSHA256: cert})
		}, ""},
		{"vm-agent registers another Node", register(nodeB), notOwnNode},
		{"vm-agent creates another Node", func(ctx context.Context) error { return vmA.Create(ctx, node("node-c")) }, notOwnNode},
		// (admission judges a create before storage finds the Node exists)
		{"vm-agent creates its Node with a foreign label", func(ctx context.Context) error {
			n := node(nodeA)
			n.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
			return vmA.Create(ctx, n)
		}, foreignLabel},
		{"vm-agent creates its Node tainted", func(ctx context.Context) error {
			n := node(nodeA)
			n.Spec.Taints = []corev1.Taint{{Key: "evil", Effect: corev1.TaintEffectNoSchedule}}
			return vmA.Create(ctx, n)
		}, nodeSpec},
		{"vm-agent publishes its console on another Node", func(ctx context.Context) error {
			return endpoint.Publish(ctx, vmA, nodeendpoint.Console, nodeB, nodeendpoint.Endpoint{Address: "10.0.0.1:8186", CertSHA256: cert})
		}, notOwnNode},
		{"vm-agent adds a foreign label to its Node", patchNode(vmA, nodeA, `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`), foreignLabel},
		{"vm-agent removes the kubelet's label", patchNode(vmA, nodeA, `{"metadata":{"labels":{"kubernetes.io/hostname":null}}}`), foreignLabel},
		{"vm-agent adds a foreign annotation", patchNode(vmA, nodeA, `{"metadata":{"annotations":{"example.com/x":"y"}}}`), foreignAnno},
		{"vm-agent taints its Node", patchNode(vmA, nodeA, `{"spec":{"taints":[{"key":"evil","effect":"NoSchedule"}]}}`), nodeSpec},
		{"vm-agent cordons its Node", patchNode(vmA, nodeA, `{"spec":{"unschedulable":true}}`), nodeSpec},
		{"vm-agent adds a finalizer to its Node", patchNode(vmA, nodeA, `{"metadata":{"finalizers":["example.com/keep"]}}`), nodeMeta},
		{"vm-agent marks its Node not Ready", patchNodeStatus(vmA, nodeA, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Evil"}]}}`), nodeStatus},
		{"vm-agent adds an extended resource", patchNodeStatus(vmA, nodeA, `{"status":{"capacity":{"example.com/gpu":"8"}}}`), nodeStatus},
		{"vm-agent deletes its Node", func(ctx context.Context) error { return vmA.Delete(ctx, node(nodeA)) }, `cannot delete resource "nodes"`},
		{"vm-agent on node B labels node A", patchNode(vmB, nodeA, `{"metadata":{"labels":{"converge.dev/vm-agent":"true"}}}`), notOwnNode},
		{"vm-agent on node B labels node B", patchNode(vmB, nodeB, `{"metadata":{"labels":{"converge.dev/vm-agent":"true"}}}`), ""},
		{"vm-agent without a node labels node A", patchNode(vmNone, nodeA, `{"metadata":{"labels":{"converge.dev/vm-agent":"true"}}}`), noNode},

		// The VM agent on VMIs: its own through APISource (finalizer, then
		// status), another node's directly.
		{"vm-agent stores the status of its VMI", func(context.Context) error {
			return store(src, vmiA, nodeA)
		}, ""},
		{"vm-agent stores the status of node B's VMI", func(context.Context) error {
			return store(src, vmiB, nodeA)
		}, "still pending"},
		{"vm-agent adds its finalizer to node B's VMI", func(ctx context.Context) error {
			v := &kubevirtv1.VirtualMachineInstance{}
			must(t, e.admin.Get(ctx, client.ObjectKeyFromObject(vmiB), v))
			v.Finalizers = append(v.Finalizers, agent.Finalizer)
			return vmA.Update(ctx, v)
		}, otherVMI},
		{"vm-agent patches the status of node B's VMI", func(ctx context.Context) error {
			return statusPatch(ctx, vmA, vmiB.DeepCopy(), `{"status":{"phase":"Failed"}}`)
		}, otherVMI},
		{"vm-agent moves its VMI to node B", func(ctx context.Context) error {
			return statusPatch(ctx, vmA, vmiA.DeepCopy(), `{"status":{"nodeName":"node-b"}}`)
		}, otherVMI},

		// bridge-marker: its bridges on its own Node's status only.
		{"bridge-marker publishes a bridge on its Node", patchNodeStatus(bmA, nodeA, `{"status":{"capacity":{"`+v1alpha1.BridgeResourcePrefix+`br0":"1k"},"allocatable":{"`+v1alpha1.BridgeResourcePrefix+`br0":"1k"}}}`), ""},
		{"bridge-marker publishes a bridge on another Node", patchNodeStatus(bmA, nodeB, `{"status":{"capacity":{"bridge.network.kubevirt.io/br0":"1k"}}}`), notOwnNode},
		{"bridge-marker changes its Node's CPUs", patchNodeStatus(bmA, nodeA, `{"status":{"capacity":{"cpu":"64"}}}`), nodeStatus},
		{"bridge-marker labels its Node", patchNode(bmA, nodeA, `{"metadata":{"labels":{"evil":"x"}}}`), rbacForbidden},

		// cdi-importer: its label and upload endpoint on its own Node.
		{"cdi-importer labels its Node", patchNode(ciA, nodeA, `{"metadata":{"labels":{"`+v1alpha1.ImporterNodeLabel+`":"true"}}}`), ""},
		{"cdi-importer publishes its upload server", func(ctx context.Context) error {
			return endpoint.Publish(ctx, ciA, nodeendpoint.Upload, nodeA, nodeendpoint.Endpoint{Address: "10.0.0.1:8187", CertSHA256: cert})
		}, ""},
		{"cdi-importer labels another Node", patchNode(ciA, nodeB, `{"metadata":{"labels":{"converge.dev/cdi-importer":"true"}}}`), notOwnNode},
		{"cdi-importer sets the VM agent's label", patchNode(ciA, nodeA, `{"metadata":{"labels":{"converge.dev/vm-agent":"false"}}}`), foreignLabel},

		// The hostpath provisioner: the PVs of its node, the PVCs selected
		// for it.
		{"hostpath creates a PV on its node", func(ctx context.Context) error { return hpA.Create(ctx, pvA) }, ""},
		{"hostpath creates a PV on another node", func(ctx context.Context) error {
			return hpA.Create(ctx, pv("pv-x", "kubevirt.io.hostpath-provisioner", nodeB))
		}, otherPV},
		{"hostpath creates a PV of another driver", func(ctx context.Context) error { return hpA.Create(ctx, pv("pv-y", "other.csi.example.com", nodeA)) }, otherPV},
		{"hostpath adds its finalizer to its PV", finalizer(hpA, "pv-a"), ""},
		{"hostpath adds its finalizer to another node's PV", finalizer(hpA, "pv-b"), otherPV},
		{"hostpath changes its PV's reclaim policy", func(ctx context.Context) error {
			return hpA.Patch(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-a"}}, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}`)))
		}, pvFinalizers},
		// The resizer: a larger capacity on its own PVs, the status of
		// the claims selected for its node.
		{"hostpath grows its PV", patchPV(hpA, "pv-a", `{"spec":{"capacity":{"storage":"2Gi"}}}`), ""},
		{"hostpath shrinks its PV", patchPV(hpA, "pv-a", `{"spec":{"capacity":{"storage":"1Gi"}}}`), pvFinalizers},
		{"hostpath grows its PV and changes its access modes", patchPV(hpA, "pv-a", `{"spec":{"capacity":{"storage":"3Gi"},"accessModes":["ReadWriteMany"]}}`), pvFinalizers},
		{"hostpath grows another node's PV", patchPV(hpA, "pv-b", `{"spec":{"capacity":{"storage":"2Gi"}}}`), otherPV},
		{"hostpath records a resize in its claim's status", claimCapacity(e, hpA, pvcD, "2Gi"), ""},
		{"hostpath writes the status of another node's claim", claimCapacity(e, hpA, pvcB, "2Gi"), otherPVCStatus},
		{"hostpath deletes another node's PV", func(ctx context.Context) error { return hpA.Delete(ctx, pvB) }, otherPV},
		{"hostpath deletes its PV", func(ctx context.Context) error { return hpA.Delete(ctx, pvA) }, ""},
		{"hostpath reschedules a claim selected for its node", reschedule(hpA, pvcA, nil), ""},
		{"hostpath reschedules a claim selected for another node", reschedule(hpA, pvcB, nil), otherPVC},
		{"hostpath labels a claim", reschedule(hpA, pvc(t, e, "claim-c", nodeA), map[string]string{"evil": "x"}), otherPVC},
	}
	// Its csi-snapshotter: the VolumeSnapshotContents of its node.
	steps = append(steps, contentSteps(t, e, hpA)...)
	for _, s := range steps {
		err := s.do(ctx)
		switch {
		case s.want == "" && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.want != "" && err == nil:
			t.Errorf("%s: allowed, want refused with %q", s.name, s.want)
		case s.want != "" && !contains(err.Error(), s.want):
			t.Errorf("%s: %v\nwant an error containing %q", s.name, err, s.want)
		default:
			t.Logf("%s: %v", s.name, orOK(err))
		}
	}

	// What the allowed steps wrote is there.
	n := &corev1.Node{}
	must(t, e.admin.Get(ctx, client.ObjectKey{Name: nodeA}, n))
	for k, want := range map[string]string{v1alpha1.AgentLabel: "true", kubevirtv1.NodeSchedulable: "true", v1alpha1.ImporterNodeLabel: "true", "kubernetes.io/hostname": nodeA} {
		if n.Labels[k] != want {
			t.Errorf("node A label %s = %q, want %q", k, n.Labels[k], want)
		}
	}
	for _, k := range []string{v1alpha1.AllocatableAnnotation, kubevirtv1.VirtHandlerHeartbeat, nodeendpoint.ConsoleAddressAnnotation, nodeendpoint.UploadAddressAnnotation} {
		if n.Annotations[k] == "" {
			t.Errorf("node A lacks annotation %s", k)
		}
	}
	if n.Spec.Unschedulable || len(n.Finalizers) != 0 || n.Labels["node-role.kubernetes.io/control-plane"] != "" {
		t.Errorf("node A: a refused change is there: %+v %v %v", n.Spec, n.Finalizers, n.Labels)
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == "evil" {
			t.Errorf("node A: a refused taint is there: %v", taint)
		}
	}
	v := &kubevirtv1.VirtualMachineInstance{}
	must(t, e.admin.Get(ctx, client.ObjectKeyFromObject(vmiA), v))
	if v.Status.Phase != kubevirtv1.Scheduled || v.Status.NodeName != nodeA || len(v.Finalizers) == 0 {
		t.Errorf("VMI on node A: phase %q node %q finalizers %v, want Scheduled on %s with the agent's finalizer", v.Status.Phase, v.Status.NodeName, v.Finalizers, nodeA)
	}
	claim := &corev1.PersistentVolumeClaim{}
	must(t, e.admin.Get(ctx, client.ObjectKeyFromObject(pvcD), claim))
	if got := claim.Status.Capacity[corev1.ResourceStorage]; got.String() != "2Gi" {
		t.Errorf("claim-d status capacity %s, want the resizer's 2Gi", got.String())
	}
	checkContents(t, e)
}
