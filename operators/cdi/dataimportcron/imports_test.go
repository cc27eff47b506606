package dataimportcron

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// TestNewDataVolume: the template with its URL pinned, the cron's labels
// (cleanup only under retentionPolicy None), CDI's annotations, the
// passed labels and annotation, and nothing of the template's metadata
// but its labels and annotations.
func TestNewDataVolume(t *testing.T) {
	none, all := cdiv1.DataImportCronRetainNone, cdiv1.DataImportCronRetainAll
	url := "docker://127.0.0.1:5000/disks/fedora:40"
	for _, tc := range []struct {
		name    string
		policy  *cdiv1.DataImportCronRetentionPolicy
		cleanup bool
	}{
		{"retain all (default)", nil, false},
		{"retain all", &all, false},
		{"retain none", &none, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cron := &cdiv1.DataImportCron{
				ObjectMeta: metav1.ObjectMeta{Name: "fedora-cron", Namespace: "golden",
					Labels:      map[string]string{"instancetype.kubevirt.io/default-preference": "fedora", "other": "x"},
					Annotations: map[string]string{AnnPodRetainAfterCompletion: "true"}},
				Spec: cdiv1.DataImportCronSpec{ManagedDataSource: "fedora", Schedule: "@daily", RetentionPolicy: tc.policy,
					Template: cdiv1.DataVolume{
						ObjectMeta: metav1.ObjectMeta{Name: "ignored", ResourceVersion: "7", Labels: map[string]string{"team": "a"}},
						Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url}},
							Storage: &cdiv1.StorageSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}},
			}
			now := time.Date(2026, 11, 28, 3, 0, 0, 5, time.UTC)
			dv := NewDataVolume(cron, "fedora-0123456789ab", "sha256:0123456789abcdef", now)
			if dv.Name != "fedora-0123456789ab" || dv.Namespace != "golden" || dv.ResourceVersion != "" {
				t.Errorf("metadata %+v", dv.ObjectMeta)
			}
			if got := *dv.Spec.Source.Registry.URL; got != "docker://127.0.0.1:5000/disks/fedora@sha256:0123456789abcdef" {
				t.Errorf("URL %s", got)
			}
			if *cron.Spec.Template.Spec.Source.Registry.URL != url {
				t.Errorf("the cron's template was changed")
			}
			want := map[string]string{"team": "a", LabelCron: "fedora-cron", labelManagedBy: controllerName, labelComponent: "storage",
				"instancetype.kubevirt.io/default-preference": "fedora"}
			if tc.cleanup {
				want[LabelCleanup] = "true"
			}
			if len(dv.Labels) != len(want) {
				t.Errorf("labels %v, want %v", dv.Labels, want)
			}
			for k, v := range want {
				if dv.Labels[k] != v {
					t.Errorf("label %s=%q, want %q", k, dv.Labels[k], v)
				}
			}
			if dv.Annotations[AnnImmediateBinding] != "true" || dv.Annotations[AnnPodRetainAfterCompletion] != "true" ||
				dv.Annotations[AnnLastUseTime] != "2026-11-28T03:00:00.000000005Z" {
				t.Errorf("annotations %v", dv.Annotations)
			}
		})
	}
}

// TestImportsToKeep: spec.importsToKeep when >= 0 (0 keeps none), else 3.
func TestImportsToKeep(t *testing.T) {
	n := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		in   *int32
		want int
	}{{nil, 3}, {n(0), 0}, {n(1), 1}, {n(5), 5}, {n(-1), 3}} {
		if got := ImportsToKeep(&cdiv1.DataImportCron{Spec: cdiv1.DataImportCronSpec{ImportsToKeep: tc.in}}); got != tc.want {
			t.Errorf("ImportsToKeep(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestSetCondition: times move only on a change, the transition time
// only on a new status.
func TestSetCondition(t *testing.T) {
	cron := &cdiv1.DataImportCron{}
	setCondition(cron, cdiv1.DataImportCronUpToDate, corev1.ConditionFalse, "No source digest", ReasonNoDigest)
	c := *FindCondition(cron, cdiv1.DataImportCronUpToDate)
	old := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	cron.Status.Conditions[0].LastTransitionTime, cron.Status.Conditions[0].LastHeartbeatTime = old, old
	setCondition(cron, cdiv1.DataImportCronUpToDate, corev1.ConditionFalse, "No source digest", ReasonNoDigest)
	if got := cron.Status.Conditions[0]; !got.LastHeartbeatTime.Equal(&old) || !got.LastTransitionTime.Equal(&old) {
		t.Errorf("unchanged condition moved its times: %+v", got)
	}
	setCondition(cron, cdiv1.DataImportCronUpToDate, corev1.ConditionFalse, "Import is progressing", ReasonInProgress)
	if got := cron.Status.Conditions[0]; got.LastHeartbeatTime.Equal(&old) || !got.LastTransitionTime.Equal(&old) || got.Reason != ReasonInProgress {
		t.Errorf("a new reason: %+v, want the heartbeat moved, the transition kept", got)
	}
	setCondition(cron, cdiv1.DataImportCronUpToDate, corev1.ConditionTrue, "Latest import is up to date", ReasonUpToDate)
	if got := cron.Status.Conditions[0]; got.LastTransitionTime.Equal(&old) || got.Status != corev1.ConditionTrue {
		t.Errorf("a new status: %+v, want the transition moved", got)
	}
	if len(cron.Status.Conditions) != 1 || c.Type != cdiv1.DataImportCronUpToDate {
		t.Errorf("conditions %+v", cron.Status.Conditions)
	}
}
