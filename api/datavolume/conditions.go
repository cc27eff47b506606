package datavolume

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// FindCondition gives a pointer into conds to the condition of type t, or
// nil. As CDI's FindConditionByType (conditions.go).
func FindCondition(conds []cdiv1.DataVolumeCondition, t cdiv1.DataVolumeConditionType) *cdiv1.DataVolumeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// SetCondition sets the condition of type t in conds (appending it if
// missing) and gives the updated slice, as CDI's updateCondition
// (conditions.go): a status change sets lastTransitionTime and
// lastHeartbeatTime to now; a reason or message change with the same status
// only lastHeartbeatTime; nothing changes otherwise.
func SetCondition(conds []cdiv1.DataVolumeCondition, t cdiv1.DataVolumeConditionType, status corev1.ConditionStatus, reason, message string) []cdiv1.DataVolumeCondition {
	c := FindCondition(conds, t)
	if c == nil {
		conds = append(conds, cdiv1.DataVolumeCondition{Type: t})
		c = &conds[len(conds)-1]
	}
	now := metav1.Now()
	switch {
	case c.Status != status:
		c.LastTransitionTime, c.LastHeartbeatTime = now, now
	case c.Reason != reason || c.Message != message:
		c.LastHeartbeatTime = now
	}
	c.Status, c.Reason, c.Message = status, reason, message
	return conds
}

// Owned reports whether phase belongs to the node agent (ImportInProgress,
// CloneInProgress, UploadReady, Succeeded, Failed): the DataVolume controller then leaves
// phase, progress, restartCount and the Running and Ready conditions
// alone. ImportInProgress, CloneInProgress, Succeeded and Failed are written by the
// cdi-importer (nodeplane/cdi/importcontroller); UploadReady by the
// agent's upload server (nodeplane/cdi/uploadserver ReadyMarker) once the
// PVC is Bound on its node, and it stays while the upload runs, as CDI's
// upload server pod keeps it.
func Owned(phase cdiv1.DataVolumePhase) bool {
	switch phase {
	case cdiv1.ImportInProgress, cdiv1.CloneInProgress, cdiv1.UploadReady, cdiv1.Succeeded, cdiv1.Failed:
		return true
	}
	return false
}
