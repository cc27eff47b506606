package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// nadGVK is the Multus NetworkAttachmentDefinition kind.
var nadGVK = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// Reconciler binds pending VMIs to nodes (ScheduleWithClaims): a VMI
// whose claims are missing or not populated waits first (WaitForVolumes),
// and one placed on a node whose WaitForFirstConsumer claims are unbound
// waits for them to be provisioned there (provision). Binding sets the
// label NodeNameLabel to the node, then writes status.nodeName, phase
// Scheduled and condition PodScheduled=True (as KubeVirt's virt-controller
// sets the label with status.nodeName); or it leaves the VMI Pending with
// PodScheduled=False, reason Unschedulable and Schedule's message, without
// NodeNameLabel, and retries when nodes or placements change and every
// Options.UnschedulableRetry. A bound VMI whose NodeNameLabel disagrees
// with status.nodeName (StaleNodeLabel) gets the label fixed.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API.
	Client client.Client
	// Reader reads NetworkAttachmentDefinitions (uncached; nil: Client).
	Reader client.Reader
	// Options are the controller's settings.
	Options Options

	mu sync.Mutex
	// assumed are the bindings written but maybe not yet in the cache,
	// as kube-scheduler's assume cache.
	assumed map[types.UID]Placed
	// bridges are the bridge requests of each bound VMI as last read
	// (at binding, then at each count), used when its
	// NetworkAttachmentDefinition can no longer be read.
	bridges map[types.UID]corev1.ResourceList
}

// Reconcile schedules the VMI req names if it is pending.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.mu.Lock() // one decision at a time: placements add up
	defer r.mu.Unlock()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !Pending(vmi) {
		if vmi.Status.NodeName != "" && StaleNodeLabel(vmi) {
			return ctrl.Result{}, client.IgnoreNotFound(setNodeLabel(ctx, r.Client, vmi, vmi.Status.NodeName))
		}
		return ctrl.Result{}, nil
	}
	if _, ok := r.assumed[vmi.UID]; ok {
		return ctrl.Result{}, nil // bound; the cache lags
	}
	claims, err := r.readClaims(ctx, vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if w := WaitForVolumes(vmi.Namespace, claims); w != nil {
		return ctrl.Result{RequeueAfter: r.Options.UnschedulableRetry}, r.waitForVolumes(ctx, vmi, w)
	}
	extra, err := r.bridgeRequests(ctx, vmi)
	if err != nil {
		return ctrl.Result{RequeueAfter: r.Options.UnschedulableRetry}, r.unschedulable(ctx, vmi, err.Error(), claims)
	}
	ratios := r.Options.ratios()
	requests := RequestsWith(vmi, extra, ratios)
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.MatchingLabels{v1alpha1.AgentLabel: "true"}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes labelled %s=true: %w", v1alpha1.AgentLabel, err)
	}
	placed, err := r.placed(ctx, ratios)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := ScheduleWithClaims(vmi, requests, nodes.Items, placed, claims)
	if d.Node == "" {
		return ctrl.Result{RequeueAfter: r.Options.UnschedulableRetry}, r.unschedulable(ctx, vmi, d.Message, claims)
	}
	if len(claims.Unbound()) > 0 {
		return ctrl.Result{RequeueAfter: r.Options.UnschedulableRetry}, r.provision(ctx, vmi, d.Node, claims)
	}
	// the label first: the agent watches its node's label, so it sees the
	// VMI before status.nodeName makes it its own
	if err := setNodeLabel(ctx, r.Client, vmi, d.Node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("binding to node %s: %w", d.Node, err))
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	vmi.Status.NodeName = d.Node
	setPhase(vmi, kubevirtv1.Scheduled)
	setVolumeConditions(vmi, claims)
	setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled), Status: corev1.ConditionTrue})
	if err := r.Client.Status().Patch(ctx, vmi, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("VirtualMachineInstance %s: binding to node %s: %w", req, d.Node, err))
	}
	if r.assumed == nil {
		r.assumed = map[types.UID]Placed{}
	}
	r.assumed[vmi.UID] = Placed{Node: d.Node, Requests: requests}
	r.rememberBridges(vmi.UID, extra)
	return ctrl.Result{}, nil
}

// Pending reports whether vmi waits for a node: no status.nodeName, phase
// "" or Pending, not being deleted.
func Pending(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi.DeletionTimestamp == nil && vmi.Status.NodeName == "" &&
		(vmi.Status.Phase == "" || vmi.Status.Phase == kubevirtv1.Pending)
}

// placed gives the requests of the VMIs bound to nodes that have not
// ended, counted with ratios (read once per decision: Options.Ratios may
// read the KubeVirt CR), from the cache plus the assumed bindings it does
// not show yet.
// A bound VMI's bridge requests come from its NetworkAttachmentDefinitions;
// when one cannot be read (deleted after the binding, or an API error),
// the requests last read for that VMI are counted instead, and when there
// are none (the controller restarted since) the error is returned: no
// decision is made on a count that may be short of a bridge in use.
func (r *Reconciler) placed(ctx context.Context, ratios Ratios) ([]Placed, error) {
	list := &kubevirtv1.VirtualMachineInstanceList{}
	// Read-only: the cache's own objects, not copies (a copy of every VMI
	// per decision was 12% of converge-controller's CPU at 500 VMs).
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing VirtualMachineInstances: %w", err)
	}
	var out []Placed
	seen := map[types.UID]bool{}
	for i := range list.Items {
		v := &list.Items[i]
		seen[v.UID] = true
		if a, ok := r.assumed[v.UID]; ok && v.Status.NodeName == "" {
			out = append(out, a)
			continue
		}
		delete(r.assumed, v.UID)
		if v.Status.NodeName == "" || vmstate.Final(v.Status.Phase) {
			delete(r.bridges, v.UID)
			continue
		}
		extra, err := r.bridgeRequests(ctx, v)
		if err != nil {
			known, ok := r.bridges[v.UID]
			if !ok {
				return nil, fmt.Errorf("VirtualMachineInstance %s/%s on node %s: counting its bridges: %w", v.Namespace, v.Name, v.Status.NodeName, err)
			}
			extra = known
		}
		r.rememberBridges(v.UID, extra)
		// Counted with the ratios in force now (KubeVirt fixes a VMI's
		// requests when its pod is created; converge, without pods,
		// recounts).
		out = append(out, Placed{Node: v.Status.NodeName, Requests: RequestsWith(v, extra, ratios)})
	}
	// An assumed VMI was in the cache when it was bound (Reconcile read
	// it there), and the cache only loses an object once it is deleted:
	// one missing from the list is gone, and so is its placement.
	for uid := range r.assumed {
		if !seen[uid] {
			delete(r.assumed, uid)
		}
	}
	for uid := range r.bridges {
		if _, ok := r.assumed[uid]; !seen[uid] && !ok {
			delete(r.bridges, uid)
		}
	}
	return out, nil
}

func (r *Reconciler) rememberBridges(uid types.UID, l corev1.ResourceList) {
	if r.bridges == nil {
		r.bridges = map[types.UID]corev1.ResourceList{}
	}
	r.bridges[uid] = l
}

// bridgeRequests gives one unit of a node resource per Multus network of
// vmi: the NetworkAttachmentDefinition's NADResourceAnnotation; or, when
// it has none and its CNI configuration's (first) plugin is of type
// bridge, v1alpha1.BridgeResourcePrefix + the plugin's bridge
// (DefaultCNIBridge when unset). Upstream (Multus, KubeVirt) requires the
// annotation and places a VMI without it on any node; converge infers it,
// since the VM cannot run on a node without that bridge. An error names
// the network whose definition could not be read or parsed.
func (r *Reconciler) bridgeRequests(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	for _, n := range vmi.Spec.Networks {
		if n.Multus == nil {
			continue
		}
		ns, name, ok := strings.Cut(n.Multus.NetworkName, "/")
		if !ok {
			ns, name = vmi.Namespace, n.Multus.NetworkName
		}
		nad := &unstructured.Unstructured{}
		nad.SetGroupVersionKind(nadGVK)
		if err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, nad); err != nil {
			return nil, fmt.Errorf("network %s: NetworkAttachmentDefinition %s/%s: %v", n.Name, ns, name, err)
		}
		res, err := NADResource(nad)
		if err != nil {
			return nil, fmt.Errorf("network %s: %w", n.Name, err)
		}
		if res != "" {
			q := out[res]
			q.Add(*resource.NewQuantity(1, resource.DecimalSI))
			out[res] = q
		}
	}
	return out, nil
}

// unschedulable leaves vmi Pending with PodScheduled=False/Unschedulable
// and message, and the conditions of its claims (setVolumeConditions).
func (r *Reconciler) unschedulable(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, message string, claims Claims) error {
	if err := setNodeLabel(ctx, r.Client, vmi, ""); err != nil && !apierrors.IsNotFound(err) {
		return err // a label left by a failed binding
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	setPhase(vmi, kubevirtv1.Pending)
	setVolumeConditions(vmi, claims)
	setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{
		Type:   kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled),
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: message})
	if err := r.Client.Status().Patch(ctx, vmi, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("VirtualMachineInstance %s/%s: writing Unschedulable (%s): %w", vmi.Namespace, vmi.Name, message, err)
	}
	return nil
}

func setPhase(vmi *kubevirtv1.VirtualMachineInstance, p kubevirtv1.VirtualMachineInstancePhase) {
	if vmi.Status.Phase == p {
		return
	}
	vmi.Status.Phase = p
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
		kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: metav1.Now()})
}

func setVMICondition(vmi *kubevirtv1.VirtualMachineInstance, c kubevirtv1.VirtualMachineInstanceCondition) {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == c.Type {
			if vmi.Status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = vmi.Status.Conditions[i].LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.Now()
			}
			vmi.Status.Conditions[i] = c
			return
		}
	}
	c.LastTransitionTime = metav1.Now()
	vmi.Status.Conditions = append(vmi.Status.Conditions, c)
}
