package scheduler

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/storage/volume"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// AnnSelectedNode is the PVC annotation naming the node a
// WaitForFirstConsumer claim is to be provisioned on
// (volume.kubernetes.io/selected-node): kube-scheduler sets it when it
// places the claim's first pod; converge's scheduler sets it when it
// places the claim's first VMI, and the hostpath CSI driver's provisioner
// (nodeplane/csi/provisioner) then provisions the volume on that node.
const AnnSelectedNode = volume.AnnSelectedNode

// ReasonWaitingForVolumeBinding is the reason of the PodScheduled=False
// condition of a VMI placed on a node whose WaitForFirstConsumer claims are
// being provisioned there; the VMI is bound once they are. kube-scheduler
// holds such a pod in its binding cycle without a condition; converge
// says what the VMI waits for. It is not Unschedulable: the VM reads
// WaitingForVolumeBinding (its unbound claim), not ErrorUnschedulable.
const ReasonWaitingForVolumeBinding = "WaitingForVolumeBinding"

// Claim is one PersistentVolumeClaim a VMI's volumes use (a
// persistentVolumeClaim's claimName, a dataVolume's name), with what the
// scheduler reads about it.
type Claim struct {
	// Name is the claim's name, in the VMI's namespace.
	Name string
	// PVC is the claim, nil when it does not exist.
	PVC *corev1.PersistentVolumeClaim
	// PV is the PersistentVolume the claim is bound to (spec.volumeName),
	// nil when it is unbound or that PV does not exist.
	PV *corev1.PersistentVolume
	// Class is the claim's StorageClass, nil when it names none or it does
	// not exist.
	Class *storagev1.StorageClass
	// DataVolume is the DataVolume that controls the claim or, while the
	// claim does not exist, the one of a dataVolume volume; nil when none.
	DataVolume *cdiv1.DataVolume
	// FromDataVolume: the claim comes from a dataVolume volume.
	FromDataVolume bool
}

// ClaimNames gives the claims vmi's volumes use, once each, in volume
// order, and whether each comes from a dataVolume volume.
func ClaimNames(vmi *kubevirtv1.VirtualMachineInstance) (names []string, fromDV map[string]bool) {
	fromDV = map[string]bool{}
	for _, v := range vmi.Spec.Volumes {
		name := ""
		switch {
		case v.DataVolume != nil:
			name = v.DataVolume.Name
			fromDV[name] = true
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		}
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names, fromDV
}

// bound reports whether the claim is bound to a PersistentVolume
// (spec.volumeName set, as kube-scheduler's volume binder reads it).
func (c *Claim) bound() bool { return c.PVC != nil && c.PVC.Spec.VolumeName != "" }

// waitsForFirstConsumer reports whether the claim's StorageClass binds
// WaitForFirstConsumer.
func (c *Claim) waitsForFirstConsumer() bool {
	return c.Class != nil && c.Class.VolumeBindingMode != nil && *c.Class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// populated reports whether the claim's data is there, as CDI's
// IsSucceededOrPendingPopulation (containerized-data-importer-api
// core/v1beta1 utils.go), which KubeVirt's VMI controller checks before it
// creates the virt-launcher pod: a claim a DataVolume controls is
// populated once the DataVolume is Succeeded or PendingPopulation; any
// other claim is taken as populated.
func (c *Claim) populated() bool {
	owner := metav1.GetControllerOf(c.PVC)
	if owner == nil || owner.Kind != "DataVolume" {
		return true
	}
	return c.DataVolume != nil && c.DataVolume.Name == owner.Name &&
		(c.DataVolume.Status.Phase == cdiv1.Succeeded || c.DataVolume.Status.Phase == cdiv1.PendingPopulation)
}

// VolumeWait is why a VMI may not be placed yet whatever the nodes: a
// condition to write on it, Pending.
type VolumeWait struct {
	// Condition is the VMI condition saying so.
	Condition kubevirtv1.VirtualMachineInstanceCondition
}

// WaitForVolumes gives why the VMI whose claims are claims must wait
// before it is placed, nil when it need not, as KubeVirt's VMI controller
// delays the virt-launcher pod (pkg/virt-controller/watch/vmi
// datavolumes.go areDataVolumesReady, pkg/storage/types/pvc.go
// VolumeReadyToAttachToNode):
//
//   - a claim does not exist: Synchronized=False, reason
//     FailedPvcNotFound, "PVC <ns>/<name> does not exist, waiting for it
//     to appear";
//   - a claim a DataVolume controls is not populated yet (the DataVolume is
//     neither Succeeded nor PendingPopulation): DataVolumesReady=False,
//     reason NotAllDVsReady, "Not all of the VMI's DVs are ready".
//
// KubeVirt lets a VMI whose DataVolume waits for its first consumer go on
// (its temporary pod triggers the binding); converge's DataVolume
// controller places such imports itself (operators/cdi/datavolume), so a
// DataVolume in WaitForFirstConsumer has no importer node and the VMI
// waits.
func WaitForVolumes(namespace string, claims []Claim) *VolumeWait {
	for i := range claims {
		c := &claims[i]
		if c.PVC == nil {
			return &VolumeWait{Condition: kubevirtv1.VirtualMachineInstanceCondition{
				Type: kubevirtv1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse,
				Reason:  vmstate.FailedPvcNotFoundReason,
				Message: fmt.Sprintf("PVC %s/%s does not exist, waiting for it to appear", namespace, c.Name)}}
		}
	}
	for i := range claims {
		if !claims[i].populated() {
			return &VolumeWait{Condition: kubevirtv1.VirtualMachineInstanceCondition{
				Type: kubevirtv1.VirtualMachineInstanceDataVolumesReady, Status: corev1.ConditionFalse,
				Reason: kubevirtv1.VirtualMachineInstanceReasonNotAllDVsReady, Message: "Not all of the VMI's DVs are ready"}}
		}
	}
	return nil
}

// DataVolumesReady gives the VMI's DataVolumesReady condition from the
// DataVolumes of its dataVolume volumes, as KubeVirt's
// aggregateDataVolumesConditions (pkg/virt-controller/watch/vmi
// datavolumes.go): True (AllDVsReady) when every one's Ready condition is
// True, else NotAllDVsReady with False if one is False, Unknown
// otherwise; ok is false when the VMI has no dataVolume volume (no
// condition).
func DataVolumesReady(claims []Claim) (c kubevirtv1.VirtualMachineInstanceCondition, ok bool) {
	c = kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceDataVolumesReady,
		Status: corev1.ConditionTrue, Reason: kubevirtv1.VirtualMachineInstanceReasonAllDVsReady, Message: "All of the VMI's DVs are bound and ready"}
	for i := range claims {
		if !claims[i].FromDataVolume || claims[i].DataVolume == nil {
			continue
		}
		ok = true
		st := corev1.ConditionUnknown
		for _, dc := range claims[i].DataVolume.Status.Conditions {
			if dc.Type == cdiv1.DataVolumeReady {
				st = dc.Status
			}
		}
		if st != corev1.ConditionTrue {
			c.Reason = kubevirtv1.VirtualMachineInstanceReasonNotAllDVsReady
			if st == corev1.ConditionFalse || c.Status == corev1.ConditionTrue {
				c.Status = st
			}
		}
	}
	if c.Status != corev1.ConditionTrue {
		c.Message = "Not all of the VMI's DVs are ready"
	}
	return c, ok
}

// Claims are a VMI's claims as the node filter sees them.
type Claims []Claim

// unboundImmediate gives the claims that are unbound and not
// WaitForFirstConsumer: nothing converge does will bind them, so the VMI
// is unschedulable on every node (kube-scheduler's VolumeBinding
// PreFilter: "pod has unbound immediate PersistentVolumeClaims").
func (cs Claims) unboundImmediate() []string {
	var out []string
	for i := range cs {
		if c := &cs[i]; c.PVC != nil && !c.bound() && !c.waitsForFirstConsumer() {
			out = append(out, c.Name)
		}
	}
	return out
}

// Unbound gives the claims that are not bound yet.
func (cs Claims) Unbound() []string {
	var out []string
	for i := range cs {
		if !cs[i].bound() {
			out = append(out, cs[i].Name)
		}
	}
	return out
}

// reject gives why node n cannot take a VMI with these claims, "" when
// it can, as kube-scheduler's VolumeBinding filter
// (pkg/scheduler/framework/plugins/volumebinding): a bound claim whose
// PersistentVolume's node affinity does not match n's labels ("node(s)
// had volume node affinity conflict"), a bound claim whose volume does
// not exist ("node(s) unavailable due to one or more pvc(s) bound to
// non-existent pv(s)"), an unbound WaitForFirstConsumer claim whose
// selected node is another, or whose StorageClass's allowedTopologies
// exclude n ("node(s) didn't find available persistent volumes to
// bind"). converge adds the first claim at fault, in parentheses.
func (cs Claims) reject(n *corev1.Node) string {
	for i := range cs {
		c := &cs[i]
		switch {
		case c.bound() && c.PV == nil:
			return fmt.Sprintf("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s) (PersistentVolumeClaim %s)", c.Name)
		case c.bound():
			if err := volume.CheckNodeAffinity(c.PV, n.Labels); err != nil {
				return fmt.Sprintf("node(s) had volume node affinity conflict (PersistentVolumeClaim %s on PersistentVolume %s)", c.Name, c.PV.Name)
			}
		case c.waitsForFirstConsumer():
			if sel, ok := c.PVC.Annotations[AnnSelectedNode]; ok && sel != n.Name {
				return fmt.Sprintf("node(s) didn't find available persistent volumes to bind (PersistentVolumeClaim %s is provisioned on node %s)", c.Name, sel)
			}
			if !topologyMatches(c.Class.AllowedTopologies, n.Labels) {
				return fmt.Sprintf("node(s) didn't find available persistent volumes to bind (PersistentVolumeClaim %s: StorageClass %s allowedTopologies)", c.Name, c.Class.Name)
			}
		}
	}
	return ""
}

// topologyMatches reports whether labels satisfy a StorageClass's
// allowedTopologies: no term, or one term whose every expression's key
// has one of its values (as Kubernetes' MatchTopologySelectorTerms).
func topologyMatches(terms []corev1.TopologySelectorTerm, labels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		ok := true
		for _, e := range t.MatchLabelExpressions {
			if v, has := labels[e.Key]; !has || !slices.Contains(e.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// ToProvision gives the unbound WaitForFirstConsumer claims without a
// selected node: once the VMI's node is chosen, the scheduler sets
// AnnSelectedNode on them, as kube-scheduler's volume binder does
// (BindPodVolumes), and waits for them to be bound.
func (cs Claims) ToProvision() []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for i := range cs {
		c := &cs[i]
		if c.PVC != nil && !c.bound() && c.waitsForFirstConsumer() {
			if _, ok := c.PVC.Annotations[AnnSelectedNode]; !ok {
				out = append(out, c.PVC)
			}
		}
	}
	return out
}

// unboundImmediateMessage is the message of a VMI with unbound immediate
// claims on a cluster of n agent nodes.
func unboundImmediateMessage(n int, names []string) string {
	return fmt.Sprintf("0/%d nodes are available: VMI has unbound immediate PersistentVolumeClaims (%s).", n, strings.Join(names, ", "))
}
