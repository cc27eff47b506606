package datavolume

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func TestSetConditionTimes(t *testing.T) {
	c := SetCondition(nil, cdiv1.DataVolumeReady, corev1.ConditionFalse, "A", "")
	first := c[0].LastTransitionTime
	c[0].LastTransitionTime = metav1.NewTime(first.Add(-3600e9))
	old := c[0].LastTransitionTime
	c = SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionFalse, "B", "m")
	if !c[0].LastTransitionTime.Equal(&old) || c[0].Reason != "B" {
		t.Errorf("a reason change moved lastTransitionTime or lost the reason: %+v", c[0])
	}
	c = SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionTrue, "", "")
	if c[0].LastTransitionTime.Equal(&old) || len(c) != 1 {
		t.Errorf("a status change kept lastTransitionTime: %+v", c)
	}
}

func TestOwned(t *testing.T) {
	for _, tc := range []struct {
		phase cdiv1.DataVolumePhase
		want  bool
	}{
		{"", false}, {cdiv1.Pending, false}, {cdiv1.WaitForFirstConsumer, false}, {cdiv1.ImportScheduled, false}, {cdiv1.UploadScheduled, false},
		{cdiv1.ImportInProgress, true}, {cdiv1.CloneInProgress, true}, {cdiv1.CloneScheduled, false}, {cdiv1.UploadReady, true}, {cdiv1.Succeeded, true}, {cdiv1.Failed, true},
	} {
		if got := Owned(tc.phase); got != tc.want {
			t.Errorf("Owned(%q) = %v, want %v", tc.phase, got, tc.want)
		}
	}
}
