package dataimportcron

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Condition reasons, CDI's (dataimportcron-conditions.go).
const (
	ReasonNoDigest   = "NoDigest"
	ReasonNoImport   = "NoImport"
	ReasonOutdated   = "Outdated"
	ReasonScheduled  = "ImportScheduled"
	ReasonInProgress = "ImportProgressing"
	ReasonUpToDate   = "UpToDate"
)

// setCondition sets the cron's condition of type t, as CDI's
// updateDataImportCronCondition: a new status moves lastTransitionTime,
// any change moves lastHeartbeatTime, nothing moves when nothing changed.
func setCondition(cron *cdiv1.DataImportCron, t cdiv1.DataImportCronConditionType, status corev1.ConditionStatus, message, reason string) {
	c := FindCondition(cron, t)
	if c == nil {
		cron.Status.Conditions = append(cron.Status.Conditions, cdiv1.DataImportCronCondition{Type: t})
		c = &cron.Status.Conditions[len(cron.Status.Conditions)-1]
	}
	if c.Status == status && c.Message == message && c.Reason == reason {
		return
	}
	now := metav1.Now()
	if c.Status != status {
		c.Status = status
		c.LastTransitionTime = now
	}
	c.LastHeartbeatTime = now
	c.Reason, c.Message = reason, message
}

// FindCondition gives the cron's condition of type t, nil when it has
// none.
func FindCondition(cron *cdiv1.DataImportCron, t cdiv1.DataImportCronConditionType) *cdiv1.DataImportCronCondition {
	for i := range cron.Status.Conditions {
		if cron.Status.Conditions[i].Type == t {
			return &cron.Status.Conditions[i]
		}
	}
	return nil
}
