package datavolume

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// ControllerStatus gives dv's status as the controller sees it, from its
// PVC (nil: not created yet) and whether the PVC's StorageClass binds
// WaitForFirstConsumer:
//
//   - no PVC: Pending; Bound=False NotFound;
//   - PVC Pending, WaitForFirstConsumer and no selected node:
//     WaitForFirstConsumer;
//   - PVC Pending with a selected node (import placed), or Bound:
//     ImportScheduled, or UploadScheduled for spec.source.upload (CDI's
//     upload controller; the agent then sets UploadReady);
//   - PVC Pending otherwise: Pending.
//
// Bound follows the PVC as in CDI's updateBoundCondition ("PVC NAME
// Bound"/Bound, "PVC NAME Pending"/Pending, "Claim Lost"/ClaimLost). Ready
// is False and Running False (reason empty, as CDI before its importer pod
// runs) until the agent takes over: once Owned(dv.Status.Phase), only
// claimName and Bound are updated. dv is not modified.
func ControllerStatus(dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, wffc bool) cdiv1.DataVolumeStatus {
	st := *dv.Status.DeepCopy()
	c := st.Conditions
	if pvc == nil {
		c = SetCondition(c, cdiv1.DataVolumeBound, corev1.ConditionFalse, ReasonNotFound, "No PVC found")
	} else {
		st.ClaimName = pvc.Name
		switch pvc.Status.Phase {
		case corev1.ClaimBound:
			c = SetCondition(c, cdiv1.DataVolumeBound, corev1.ConditionTrue, ReasonBound, fmt.Sprintf("PVC %s Bound", pvc.Name))
		case corev1.ClaimLost:
			c = SetCondition(c, cdiv1.DataVolumeBound, corev1.ConditionFalse, ReasonClaimLost, "Claim Lost")
		default:
			c = SetCondition(c, cdiv1.DataVolumeBound, corev1.ConditionFalse, ReasonPending, fmt.Sprintf("PVC %s Pending", pvc.Name))
		}
	}
	if Owned(st.Phase) {
		st.Conditions = c
		return st
	}
	scheduled := cdiv1.ImportScheduled
	if IsUpload(dv) {
		scheduled = cdiv1.UploadScheduled
	}
	switch {
	case pvc == nil:
		st.Phase = cdiv1.Pending
	case pvc.Status.Phase == corev1.ClaimBound:
		st.Phase = scheduled
	case pvc.Status.Phase == corev1.ClaimLost:
		// Keep the phase: the PVC must be fixed or recreated.
	case pvc.Annotations[AnnSelectedNode] != "":
		st.Phase = scheduled
	case wffc:
		st.Phase = cdiv1.WaitForFirstConsumer
	default:
		st.Phase = cdiv1.Pending
	}
	if FindCondition(c, cdiv1.DataVolumeRunning) == nil {
		c = SetCondition(c, cdiv1.DataVolumeRunning, corev1.ConditionFalse, "", "")
	}
	c = SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionFalse, "", "")
	st.Conditions = c
	return st
}
