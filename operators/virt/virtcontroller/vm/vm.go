package vm

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// Reconciler is the VirtualMachine controller: it creates, deletes and
// recreates each VM's VMI (same namespace and name, controller owner
// reference to the VM, label kubevirt.io/vm, annotation
// v1alpha1.RunStrategyAnnotation) per status.stateChangeRequests
// (StateChange) first, then per Decide, and writes the VM's status.
// On VM deletion it deletes the VMI first (finalizer
// kubevirt.io/virtualMachineControllerFinalize, as KubeVirt).
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API.
	Client client.Client
	// APIReader reads uncached (nil: Client): the VM's recheck before a
	// DataVolume is adopted.
	APIReader client.Reader
}

// Reconcile brings the VM req names one step toward its run strategy.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, vmi); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("VirtualMachineInstance %s: %w", req, err)
		}
		vmi = nil
	}
	if vmi != nil && !metav1.IsControlledBy(vmi, vm) {
		return ctrl.Result{}, r.writeStatus(ctx, vm, nil, fmt.Errorf("VirtualMachineInstance %s exists and is not controlled by this VirtualMachine", req))
	}

	if vm.DeletionTimestamp != nil {
		if vmi != nil {
			if vmi.DeletionTimestamp == nil {
				if err := r.Client.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
					return ctrl.Result{}, fmt.Errorf("VirtualMachine %s: deleting its VMI: %w", req, err)
				}
			}
			return ctrl.Result{}, r.writeStatus(ctx, vm, vmi, nil)
		}
		if controllerutil.RemoveFinalizer(vm, kubevirtv1.VirtualMachineControllerFinalizer) {
			if err := r.Client.Update(ctx, vm); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("VirtualMachine %s: removing finalizer: %w", req, err)
			}
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(vm, kubevirtv1.VirtualMachineControllerFinalizer) {
		if err := r.Client.Update(ctx, vm); err != nil {
			return ctrl.Result{}, fmt.Errorf("VirtualMachine %s: adding finalizer: %w", req, err)
		}
	}

	if err := r.syncInstancetype(ctx, vm); err != nil {
		return ctrl.Result{}, errors.Join(err, r.writeStatus(ctx, vm, vmi, err))
	}

	act, requests := StateChange(vm.Status.StateChangeRequests, vmi)
	if act == Keep && len(requests) == 0 {
		act = Decide(vmstate.RunStrategy(vm), vmi, vm.Status.Created)
	}
	wait, actErr := r.waitForDataVolumes(ctx, vm, act)
	if wait { // requests stay queued until the action can be taken
		act, requests = Keep, vm.Status.StateChangeRequests
	}
	switch act {
	case Create:
		vmi, actErr = r.create(ctx, vm)
	case Delete:
		if err := r.Client.Delete(ctx, vmi, client.Preconditions{UID: &vmi.UID}); client.IgnoreNotFound(err) != nil {
			actErr = fmt.Errorf("deleting VirtualMachineInstance %s: %w", req, err)
		}
	case Halt:
		patch := client.MergeFrom(vm.DeepCopy())
		halted := kubevirtv1.RunStrategyHalted
		vm.Spec.RunStrategy, vm.Spec.Running = &halted, nil //nolint:staticcheck // clear the legacy field too
		if err := r.Client.Patch(ctx, vm, patch); err != nil {
			actErr = fmt.Errorf("VirtualMachine %s: setting runStrategy Halted after its Once run: %w", req, err)
		}
	}
	if len(requests) != len(vm.Status.StateChangeRequests) {
		// Only this VM's queue changed: with the resourceVersion, so that a
		// request appended meanwhile is not lost (the patch fails and the
		// VM is reconciled again).
		patch := client.MergeFromWithOptions(vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		vm.Status.StateChangeRequests = requests
		if err := r.Client.Status().Patch(ctx, vm, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("VirtualMachine %s: updating status.stateChangeRequests: %w", req, err)
		}
	}
	if err := r.writeStatus(ctx, vm, vmi, actErr); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, actErr
}

// create creates vm's VMI from spec.template; an existing one (a previous
// VMI still being deleted, or a stale cache) is not an error.
func (r *Reconciler) create(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*kubevirtv1.VirtualMachineInstance, error) {
	vmi := NewVMI(vm)
	if err := r.expandInstancetype(ctx, vm, vmi); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, vmi); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("VirtualMachine %s/%s: creating its VirtualMachineInstance: %w", vm.Namespace, vm.Name, err)
	}
	return vmi, nil
}

// NewVMI gives the VMI vm runs: named as vm, with spec.template's labels,
// annotations and spec, the label kubevirt.io/vm=<name>, the annotation
// v1alpha1.RunStrategyAnnotation=<run strategy> and a controller owner
// reference to vm.
func NewVMI(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name,
			Labels: map[string]string{}, Annotations: map[string]string{}},
	}
	if t := vm.Spec.Template; t != nil {
		maps.Copy(vmi.Labels, t.ObjectMeta.Labels)
		maps.Copy(vmi.Annotations, t.ObjectMeta.Annotations)
		t.Spec.DeepCopyInto(&vmi.Spec)
	}
	vmi.Labels[kubevirtv1.VirtualMachineLabel] = vm.Name
	vmi.Annotations[v1alpha1.RunStrategyAnnotation] = string(vmstate.RunStrategy(vm))
	vmi.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)}
	return vmi
}

// writeStatus patches vm's status from vmi (nil: none) and actErr (the
// error of this reconcile's action: condition Failure).
func (r *Reconciler) writeStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, actErr error) error {
	patch := client.MergeFrom(vm.DeepCopy())
	st := &vm.Status
	st.Created = vmi != nil && vmi.DeletionTimestamp == nil
	st.Ready = vmi != nil && vmi.Status.Phase == kubevirtv1.Running && vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceReady) == corev1.ConditionTrue
	st.PrintableStatus = r.printableStatus(ctx, vm, vmi)
	rs := vmstate.RunStrategy(vm)
	st.RunStrategy = rs
	st.ObservedGeneration = vm.Generation

	ready := kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse}
	switch {
	case st.Ready:
		ready.Status = corev1.ConditionTrue
	case vmi == nil:
		ready.Reason, ready.Message = "VMINotExists", "VMI does not exist"
	default:
		ready.Reason = "VMINotReady"
		if c := findVMICondition(vmi, kubevirtv1.VirtualMachineInstanceReady); c != nil {
			ready.Reason, ready.Message = c.Reason, c.Message
		}
	}
	setCondition(st, ready)
	if vmi != nil && unschedulable(vmi) {
		c := findVMICondition(vmi, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled))
		setCondition(st, kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineConditionType(corev1.PodScheduled),
			Status: corev1.ConditionFalse, Reason: c.Reason, Message: c.Message})
	} else {
		removeCondition(st, kubevirtv1.VirtualMachineConditionType(corev1.PodScheduled))
	}
	syncVolumeConditions(st, vmi)
	if actErr != nil {
		setCondition(st, kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineFailure,
			Status: corev1.ConditionTrue, Reason: failureReason(actErr), Message: actErr.Error()})
	} else {
		removeCondition(st, kubevirtv1.VirtualMachineFailure)
	}
	if err := r.Client.Status().Patch(ctx, vm, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("VirtualMachine %s: writing status: %w", types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}, err)
	}
	return nil
}

func findVMICondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == t {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

// setCondition sets c in st, keeping lastTransitionTime when the status
// did not change.
func setCondition(st *kubevirtv1.VirtualMachineStatus, c kubevirtv1.VirtualMachineCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.Now()
			}
			st.Conditions[i] = c
			return
		}
	}
	c.LastTransitionTime = metav1.Now()
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *kubevirtv1.VirtualMachineStatus, t kubevirtv1.VirtualMachineConditionType) {
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}
