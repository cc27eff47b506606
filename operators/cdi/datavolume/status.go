package datavolume

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
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
//     upload controller; the agent then sets UploadReady), or
//     CloneScheduled for a clone (the agent then sets CloneInProgress);
//   - PVC Pending otherwise: Pending.
//
// Bound follows the PVC as in CDI's updateBoundCondition ("PVC NAME
// Bound"/Bound, "PVC NAME Pending"/Pending, "Claim Lost"/ClaimLost). Ready
// is False and Running False (reason empty, as CDI before its importer pod
// runs) until the agent takes over: once api/datavolume's
// Owned(dv.Status.Phase), only claimName and Bound are updated. dv is not
// modified.
func ControllerStatus(dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, wffc bool) cdiv1.DataVolumeStatus {
	st := *dv.Status.DeepCopy()
	c := st.Conditions
	if pvc == nil {
		c = dvapi.SetCondition(c, cdiv1.DataVolumeBound, corev1.ConditionFalse, dvapi.ReasonNotFound, "No PVC found")
	} else {
		st.ClaimName = pvc.Name
		switch pvc.Status.Phase {
		case corev1.ClaimBound:
			c = dvapi.SetCondition(c, cdiv1.DataVolumeBound, corev1.ConditionTrue, dvapi.ReasonBound, fmt.Sprintf("PVC %s Bound", pvc.Name))
		case corev1.ClaimLost:
			c = dvapi.SetCondition(c, cdiv1.DataVolumeBound, corev1.ConditionFalse, dvapi.ReasonClaimLost, "Claim Lost")
		default:
			c = dvapi.SetCondition(c, cdiv1.DataVolumeBound, corev1.ConditionFalse, dvapi.ReasonPending, fmt.Sprintf("PVC %s Pending", pvc.Name))
		}
	}
	if dvapi.Owned(st.Phase) {
		st.Conditions = c
		return st
	}
	scheduled := cdiv1.ImportScheduled
	switch {
	case dvapi.IsUpload(dv):
		scheduled = cdiv1.UploadScheduled
	case dvapi.IsClone(dv):
		scheduled = cdiv1.CloneScheduled
	}
	switch {
	case pvc == nil:
		st.Phase = cdiv1.Pending
	case pvc.Status.Phase == corev1.ClaimBound:
		st.Phase = scheduled
	case pvc.Status.Phase == corev1.ClaimLost:
		// Keep the phase: the PVC must be fixed or recreated.
	case pvc.Annotations[dvapi.AnnSelectedNode] != "":
		st.Phase = scheduled
	case wffc:
		st.Phase = cdiv1.WaitForFirstConsumer
	default:
		st.Phase = cdiv1.Pending
	}
	if dvapi.FindCondition(c, cdiv1.DataVolumeRunning) == nil {
		c = dvapi.SetCondition(c, cdiv1.DataVolumeRunning, corev1.ConditionFalse, "", "")
	}
	c = dvapi.SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionFalse, "", "")
	st.Conditions = c
	return st
}
