package resizer

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event reasons, as external-resizer's pkg/util names them.
const (
	ReasonResizing           = "Resizing"
	ReasonResizeFailed       = "VolumeResizeFailed"
	ReasonResizeSuccessful   = "VolumeResizeSuccessful"
	ReasonFileSystemRequired = "FileSystemResizeRequired"
)

// resizeConditions are the PVC condition types the resize flow owns;
// setCondition replaces them all, keeping any other condition.
var resizeConditions = []corev1.PersistentVolumeClaimConditionType{
	corev1.PersistentVolumeClaimResizing,
	corev1.PersistentVolumeClaimFileSystemResizePending,
	corev1.PersistentVolumeClaimControllerResizeError,
	corev1.PersistentVolumeClaimNodeResizeError,
}

// setCondition drops st's resize conditions and adds one of type t with
// status True and message msg (none when t is empty).
func setCondition(st *corev1.PersistentVolumeClaimStatus, t corev1.PersistentVolumeClaimConditionType, msg string) {
	st.Conditions = slices.DeleteFunc(st.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
		return slices.Contains(resizeConditions, c.Type)
	})
	if t != "" {
		st.Conditions = append(st.Conditions, corev1.PersistentVolumeClaimCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(), Message: msg})
	}
	if len(st.Conditions) == 0 {
		st.Conditions = nil
	}
}

// setStorageStatus sets allocatedResourceStatuses[storage] to s, or
// deletes it when s is empty (the map becomes nil when empty).
func setStorageStatus(st *corev1.PersistentVolumeClaimStatus, s corev1.ClaimResourceStatus) {
	if s == "" {
		delete(st.AllocatedResourceStatuses, corev1.ResourceStorage)
		if len(st.AllocatedResourceStatuses) == 0 {
			st.AllocatedResourceStatuses = nil
		}
		return
	}
	if st.AllocatedResourceStatuses == nil {
		st.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	st.AllocatedResourceStatuses[corev1.ResourceStorage] = s
}

// markInProgress is external-resizer's markControllerResizeInProgress:
// condition Resizing, allocatedResources.storage target, status
// ControllerResizeInProgress.
func markInProgress(st *corev1.PersistentVolumeClaimStatus, target resource.Quantity) {
	setCondition(st, corev1.PersistentVolumeClaimResizing, "")
	if st.AllocatedResources == nil {
		st.AllocatedResources = corev1.ResourceList{}
	}
	st.AllocatedResources[corev1.ResourceStorage] = target
	setStorageStatus(st, corev1.PersistentVolumeClaimControllerResizeInProgress)
}

// markControllerFailed is markControllerExpansionInfeasible (infeasible:
// status ControllerResizeInfeasible) or
// markControllerExpansionFailedCondition (status unchanged): condition
// ControllerResizeError with msg.
func markControllerFailed(st *corev1.PersistentVolumeClaimStatus, msg string, infeasible bool) {
	setCondition(st, corev1.PersistentVolumeClaimControllerResizeError, "failed to expand pvc with "+msg)
	if infeasible {
		setStorageStatus(st, corev1.PersistentVolumeClaimControllerResizeInfeasible)
	}
}

// markNodePending is markForPendingNodeExpansion: condition
// FileSystemResizePending, status NodeResizePending, for the kubelet.
func markNodePending(st *corev1.PersistentVolumeClaimStatus) {
	setCondition(st, corev1.PersistentVolumeClaimFileSystemResizePending, "Waiting for user to (re-)start a pod to finish file system resize of volume on node.")
	setStorageStatus(st, corev1.PersistentVolumeClaimNodeResizePending)
}

// markFinished is markOverallExpansionAsFinished: status.capacity.storage
// size, no resize condition, no storage resource status.
func markFinished(st *corev1.PersistentVolumeClaimStatus, size resource.Quantity) {
	if st.Capacity == nil {
		st.Capacity = corev1.ResourceList{}
	}
	st.Capacity[corev1.ResourceStorage] = size
	setCondition(st, "", "")
	setStorageStatus(st, "")
}
