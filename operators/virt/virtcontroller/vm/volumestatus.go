package vm

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// VolumeStatus is what a VM's printableStatus takes from the DataVolumes
// and PVCs of its VMI template's volumes (VolumeStatusOf).
type VolumeStatus struct {
	// DataVolumeError names the first DataVolume in error (KubeVirt
	// pkg/storage/types/dv.go HasDataVolumeErrors), "" when none.
	DataVolumeError string
	// Provisioning: a DataVolume is being populated (HasDataVolumeProvisioning).
	Provisioning bool
	// UnboundClaim: a PVC exists and is not Bound (pkg/storage/types/pvc.go
	// HasUnboundPVC).
	UnboundClaim bool
}

// dataVolumeNotErrorReasons are the reasons of a DataVolume's
// Running=False condition that are no error: none yet, the import or
// upload done, and the DataVolume controller still looking for an
// importer node.
var dataVolumeNotErrorReasons = map[string]bool{"": true, dvapi.ReasonCompleted: true, dvapi.ReasonNoImporterNode: true}

// VolumeStatusOf gives the VolumeStatus of volumes (a VMI template's)
// from the DataVolumes and PVCs of their namespace, which dv and pvc look
// up by name (nil: none), after KubeVirt pkg/storage/types:
//
//   - DataVolumeError: a dataVolume volume's DataVolume is Failed, or its
//     Running condition is False with reason Error or ImagePullFailed
//     (KubeVirt's, CDI's importer pod failing) or a reason of converge's
//     node agent, which names each failed attempt (HTTPError, ImportFailed,
//     …) where CDI says Error (any reason but "", Completed and
//     NoImporterNode);
//   - Provisioning: a dataVolume volume's DataVolume is neither Succeeded
//     nor PendingPopulation, and is Bound or not WaitForFirstConsumer;
//   - UnboundClaim: the PVC of a persistentVolumeClaim or dataVolume
//     volume exists and is not Bound.
func VolumeStatusOf(volumes []kubevirtv1.Volume, dv func(name string) *cdiv1.DataVolume, pvc func(name string) *corev1.PersistentVolumeClaim) VolumeStatus {
	var s VolumeStatus
	for i := range volumes {
		v := &volumes[i]
		if v.DataVolume != nil {
			if d := dv(v.DataVolume.Name); d != nil {
				if s.DataVolumeError == "" {
					s.DataVolumeError = dataVolumeError(d)
				}
				if d.Status.Phase != cdiv1.Succeeded && d.Status.Phase != cdiv1.PendingPopulation {
					bound := dvapi.FindCondition(d.Status.Conditions, cdiv1.DataVolumeBound)
					if (bound != nil && bound.Status == corev1.ConditionTrue) || d.Status.Phase != cdiv1.WaitForFirstConsumer {
						s.Provisioning = true
					}
				}
			}
		}
		if name := claimName(v); name != "" {
			if c := pvc(name); c != nil && c.Status.Phase != corev1.ClaimBound {
				s.UnboundClaim = true
			}
		}
	}
	return s
}

// dataVolumeError gives KubeVirt's message for a DataVolume in error (see
// VolumeStatusOf), "" when it is not.
func dataVolumeError(d *cdiv1.DataVolume) string {
	if d.Status.Phase == cdiv1.Failed {
		return fmt.Sprintf("DataVolume %s is in Failed phase", d.Name)
	}
	if c := dvapi.FindCondition(d.Status.Conditions, cdiv1.DataVolumeRunning); c != nil && c.Status == corev1.ConditionFalse && !dataVolumeNotErrorReasons[c.Reason] {
		return fmt.Sprintf("DataVolume %s importer has stopped running due to an error: %v", d.Name, c.Message)
	}
	return ""
}

// claimName gives the PVC a volume uses: a persistentVolumeClaim's
// claimName, or a dataVolume's name (its PVC has the DataVolume's name),
// as KubeVirt's PVCNameFromVirtVolume; "" for other volumes.
func claimName(v *kubevirtv1.Volume) string {
	switch {
	case v.DataVolume != nil:
		return v.DataVolume.Name
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	}
	return ""
}

// PrintableStatusWithVolumes is PrintableStatus with the statuses that
// come from the VM's volumes and the VMI's Synchronized condition, in
// KubeVirt's order of precedence (vm.go setPrintableStatus): after
// Terminating, Stopping, Paused and Running come ErrorPvcNotFound (the
// VMI's Synchronized=False, reason FailedPvcNotFound), DataVolumeError,
// then ErrorUnschedulable, then Provisioning and WaitingForVolumeBinding
// (an unbound PVC while the VM is set to start), before Starting and
// Stopped.
func PrintableStatusWithVolumes(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, v VolumeStatus) kubevirtv1.VirtualMachinePrintableStatus {
	s := PrintableStatus(vm, vmi)
	switch s {
	case kubevirtv1.VirtualMachineStatusTerminating, kubevirtv1.VirtualMachineStatusStopping,
		kubevirtv1.VirtualMachineStatusPaused, kubevirtv1.VirtualMachineStatusRunning:
		return s
	}
	switch {
	case vmi != nil && pvcNotFound(vmi):
		return kubevirtv1.VirtualMachineStatusPvcNotFound
	case v.DataVolumeError != "":
		return kubevirtv1.VirtualMachineStatusDataVolumeError
	case s == kubevirtv1.VirtualMachineStatusUnschedulable:
		return s
	case v.Provisioning:
		return kubevirtv1.VirtualMachineStatusProvisioning
	case v.UnboundClaim && setToStart(vm, vmi):
		return kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding
	}
	return s
}

// pvcNotFound reports whether vmi waits for a PVC that does not exist.
func pvcNotFound(vmi *kubevirtv1.VirtualMachineInstance) bool {
	c := findVMICondition(vmi, kubevirtv1.VirtualMachineInstanceSynchronized)
	return c != nil && c.Status == corev1.ConditionFalse && c.Reason == vmstate.FailedPvcNotFoundReason
}

// setToStart reports whether vm is meant to run, as KubeVirt's
// isSetToStart: Always yes, Halted no; Manual when its VMI has no stop
// request or, without one, a start request is queued; RerunOnFailure
// unless its VMI Succeeded; Once while it has no VMI.
func setToStart(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) bool {
	reqs := vm.Status.StateChangeRequests
	switch vmstate.RunStrategy(vm) {
	case kubevirtv1.RunStrategyAlways:
		return true
	case kubevirtv1.RunStrategyManual:
		if vmi != nil {
			return len(reqs) == 0 || reqs[0].Action != kubevirtv1.StopRequest || reqs[0].UID == nil || *reqs[0].UID != vmi.UID
		}
		return len(reqs) > 0 && reqs[0].Action == kubevirtv1.StartRequest
	case kubevirtv1.RunStrategyRerunOnFailure:
		return vmi == nil || vmi.Status.Phase != kubevirtv1.Succeeded
	case kubevirtv1.RunStrategyOnce:
		return vmi == nil
	}
	return false
}

// printableStatus gives vm's printableStatus (PrintableStatusWithVolumes),
// reading the DataVolumes and PVCs of its template's volumes through the
// cache; one that cannot be read is left out (logged), as KubeVirt does.
func (r *Reconciler) printableStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachinePrintableStatus {
	if vm.Spec.Template == nil {
		return PrintableStatusWithVolumes(vm, vmi, VolumeStatus{})
	}
	log := ctrl.LoggerFrom(ctx)
	get := func(name string, obj client.Object) bool {
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: vm.Namespace, Name: name}, obj)
		if client.IgnoreNotFound(err) != nil {
			log.Error(err, "reading a volume's object for the VM's printableStatus", "name", name)
		}
		return err == nil
	}
	vs := VolumeStatusOf(vm.Spec.Template.Spec.Volumes,
		func(name string) *cdiv1.DataVolume {
			dv := &cdiv1.DataVolume{}
			if !get(name, dv) {
				return nil
			}
			return dv
		},
		func(name string) *corev1.PersistentVolumeClaim {
			pvc := &corev1.PersistentVolumeClaim{}
			if !get(name, pvc) {
				return nil
			}
			return pvc
		})
	return PrintableStatusWithVolumes(vm, vmi, vs)
}

// volumeConditionTypes are the VMI conditions about its volumes that the
// VM carries too (KubeVirt's syncConditions copies every VMI condition;
// converge copies these and PodScheduled).
var volumeConditionTypes = []kubevirtv1.VirtualMachineInstanceConditionType{
	kubevirtv1.VirtualMachineInstanceSynchronized, kubevirtv1.VirtualMachineInstanceDataVolumesReady,
}

// syncVolumeConditions copies vmi's volumeConditionTypes conditions into
// st, and removes those vmi (nil: none) does not have.
func syncVolumeConditions(st *kubevirtv1.VirtualMachineStatus, vmi *kubevirtv1.VirtualMachineInstance) {
	for _, t := range volumeConditionTypes {
		var c *kubevirtv1.VirtualMachineInstanceCondition
		if vmi != nil {
			c = findVMICondition(vmi, t)
		}
		if c == nil {
			removeCondition(st, kubevirtv1.VirtualMachineConditionType(t))
			continue
		}
		setCondition(st, kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineConditionType(t),
			Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
}
