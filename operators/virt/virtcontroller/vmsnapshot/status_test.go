package vmsnapshot_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmsnapshot"
)

func condition(st *snapshotv1.VirtualMachineSnapshotStatus, t snapshotv1.ConditionType) (corev1.ConditionStatus, string) {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// TestNextStatus: KubeVirt's phases, conditions and indications from the
// source and the content.
func TestNextStatus(t *testing.T) {
	created := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	now := created.Add(time.Minute)
	ctime := metav1.NewTime(now)
	no := false
	snap := func(edit func(*snapshotv1.VirtualMachineSnapshot)) *snapshotv1.VirtualMachineSnapshot {
		s := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", CreationTimestamp: metav1.NewTime(created)},
			Status: &snapshotv1.VirtualMachineSnapshotStatus{ReadyToUse: &no}}
		if edit != nil {
			edit(s)
		}
		return s
	}
	content := func(ready bool, ct *metav1.Time) *snapshotv1.VirtualMachineSnapshotContent {
		r := ready
		return &snapshotv1.VirtualMachineSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Status: &snapshotv1.VirtualMachineSnapshotContentStatus{ReadyToUse: &r, CreationTime: ct}}
	}
	tests := []struct {
		name        string
		snap        *snapshotv1.VirtualMachineSnapshot
		src         vmsnapshot.SourceState
		content     *snapshotv1.VirtualMachineSnapshotContent
		partial     bool
		phase       snapshotv1.VirtualMachineSnapshotPhase
		progressing corev1.ConditionStatus
		progReason  string
		ready       corev1.ConditionStatus
		indications []snapshotv1.Indication
	}{
		{name: "offline, not yet locked", snap: snap(nil), src: vmsnapshot.SourceState{Exists: true, LockMsg: vmsnapshot.NotLockedMsg},
			phase: snapshotv1.InProgress, progressing: corev1.ConditionFalse, progReason: vmsnapshot.NotLockedMsg, ready: corev1.ConditionFalse},
		{name: "running without a guest agent", snap: snap(nil), src: vmsnapshot.SourceState{Exists: true, Locked: true, LockMsg: vmsnapshot.LockedMsg, Online: true},
			phase: snapshotv1.InProgress, progressing: corev1.ConditionTrue, progReason: vmsnapshot.LockedMsg, ready: corev1.ConditionFalse,
			indications: []snapshotv1.Indication{snapshotv1.VMSnapshotNoGuestAgentIndication, snapshotv1.VMSnapshotOnlineSnapshotIndication}},
		{name: "running and paused", snap: snap(nil), src: vmsnapshot.SourceState{Exists: true, Locked: true, LockMsg: vmsnapshot.LockedMsg, Online: true, Paused: true},
			phase: snapshotv1.InProgress, progressing: corev1.ConditionTrue, progReason: vmsnapshot.LockedMsg, ready: corev1.ConditionFalse,
			indications: []snapshotv1.Indication{snapshotv1.VMSnapshotOnlineSnapshotIndication, snapshotv1.VMSnapshotPausedIndication}},
		{name: "source gone", snap: snap(nil), phase: snapshotv1.InProgress, progressing: corev1.ConditionFalse, progReason: "Source does not exist", ready: corev1.ConditionFalse},
		{name: "content created and ready", snap: snap(nil), src: vmsnapshot.SourceState{Exists: true, Locked: true}, content: content(true, &ctime),
			phase: snapshotv1.Succeeded, progressing: corev1.ConditionFalse, progReason: "Operation complete", ready: corev1.ConditionTrue},
		{name: "partial", snap: snap(nil), src: vmsnapshot.SourceState{Exists: true, Locked: true}, content: content(true, &ctime), partial: true,
			phase: snapshotv1.Succeeded, progressing: corev1.ConditionFalse, progReason: "Operation complete", ready: corev1.ConditionTrue,
			indications: []snapshotv1.Indication{snapshotv1.VMSnapshotPartialSnapshotIndication}},
		{name: "created, not yet ready", snap: snap(nil), src: vmsnapshot.SourceState{Exists: true, Locked: true}, content: content(false, &ctime),
			phase: snapshotv1.Succeeded, progressing: corev1.ConditionFalse, progReason: "Operation complete", ready: corev1.ConditionFalse},
		{name: "deadline passed", snap: snap(func(s *snapshotv1.VirtualMachineSnapshot) {
			s.Spec.FailureDeadline = &metav1.Duration{Duration: 30 * time.Second}
		}),
			src: vmsnapshot.SourceState{Exists: true, LockMsg: vmsnapshot.NotLockedMsg}, phase: snapshotv1.Failed, progressing: corev1.ConditionFalse, progReason: "Operation failed", ready: corev1.ConditionFalse},
		{name: "no deadline (0)", snap: snap(func(s *snapshotv1.VirtualMachineSnapshot) { s.Spec.FailureDeadline = &metav1.Duration{} }),
			src: vmsnapshot.SourceState{Exists: true, LockMsg: vmsnapshot.NotLockedMsg}, phase: snapshotv1.InProgress, progressing: corev1.ConditionFalse, progReason: vmsnapshot.NotLockedMsg, ready: corev1.ConditionFalse},
		{name: "deleting while in progress", snap: snap(func(s *snapshotv1.VirtualMachineSnapshot) { s.DeletionTimestamp = &ctime }),
			src: vmsnapshot.SourceState{Exists: true, LockMsg: vmsnapshot.NotLockedMsg}, phase: snapshotv1.Deleting, progressing: corev1.ConditionFalse, progReason: "VM snapshot is deleting", ready: corev1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in, ex []string
			if tt.content != nil {
				in, ex = []string{"disk"}, []string{"cloudinit"}
			}
			st := vmsnapshot.NextStatus(tt.snap, tt.src, tt.content, in, ex, tt.partial, now)
			if st.Phase != tt.phase {
				t.Errorf("phase %q, want %q", st.Phase, tt.phase)
			}
			if s, r := condition(st, snapshotv1.ConditionProgressing); s != tt.progressing || r != tt.progReason {
				t.Errorf("Progressing %s %q, want %s %q", s, r, tt.progressing, tt.progReason)
			}
			if s, _ := condition(st, snapshotv1.ConditionReady); s != tt.ready {
				t.Errorf("Ready %s, want %s", s, tt.ready)
			}
			if !slices.Equal(st.Indications, tt.indications) {
				t.Errorf("indications %v, want %v", st.Indications, tt.indications)
			}
			if len(st.SourceIndications) != len(tt.indications) {
				t.Errorf("sourceIndications %v, want one per indication %v", st.SourceIndications, tt.indications)
			}
			for _, si := range st.SourceIndications {
				if si.Message != vmsnapshot.IndicationMessages[si.Indication] || si.Message == "" {
					t.Errorf("indication %s has message %q", si.Indication, si.Message)
				}
			}
			if tt.phase == snapshotv1.Failed {
				if s, r := condition(st, snapshotv1.ConditionFailure); s != corev1.ConditionTrue || r != vmsnapshot.DeadlineExceeded {
					t.Errorf("Failure %s %q, want True %q", s, r, vmsnapshot.DeadlineExceeded)
				}
			}
			if tt.content != nil && (st.SnapshotVolumes == nil || !slices.Equal(st.SnapshotVolumes.IncludedVolumes, in) || !slices.Equal(st.SnapshotVolumes.ExcludedVolumes, ex)) {
				t.Errorf("snapshotVolumes %+v, want included %v excluded %v", st.SnapshotVolumes, in, ex)
			}
			if tt.content != nil && (st.CreationTime == nil || *st.VirtualMachineSnapshotContentName != "c") {
				t.Errorf("creationTime %v, content %v: want the content's", st.CreationTime, st.VirtualMachineSnapshotContentName)
			}
		})
	}
}

// TestContentProgress: created once every VolumeSnapshot has a creation
// time, ready once all are ready, KubeVirt's error messages.
func TestContentProgress(t *testing.T) {
	ct := metav1.Now()
	yes, no, msg := true, false, "driver refused"
	tests := []struct {
		name           string
		statuses       []snapshotv1.VolumeSnapshotStatus
		missing        []string
		created, ready bool
		msg            string
	}{
		{"none yet", []snapshotv1.VolumeSnapshotStatus{{VolumeSnapshotName: "a"}}, nil, false, false, ""},
		{"cut, not ready", []snapshotv1.VolumeSnapshotStatus{{VolumeSnapshotName: "a", CreationTime: &ct, ReadyToUse: &no}}, nil, true, false, ""},
		{"all ready", []snapshotv1.VolumeSnapshotStatus{{VolumeSnapshotName: "a", CreationTime: &ct, ReadyToUse: &yes}, {VolumeSnapshotName: "b", CreationTime: &ct, ReadyToUse: &yes}}, nil, true, true, ""},
		{"no volumes", nil, nil, true, true, ""},
		{"an error", []snapshotv1.VolumeSnapshotStatus{{VolumeSnapshotName: "a", Error: &snapshotv1.Error{Message: &msg}}}, nil, false, false, "VolumeSnapshot a error: driver refused"},
		{"missing", []snapshotv1.VolumeSnapshotStatus{{VolumeSnapshotName: "a", CreationTime: &ct, ReadyToUse: &yes}}, []string{"b", "c"}, false, false, "VolumeSnapshots (b,c) missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, r, m := vmsnapshot.ContentProgress(tt.statuses, tt.missing)
			if c != tt.created || r != tt.ready || m != tt.msg {
				t.Errorf("ContentProgress = %v, %v, %q; want %v, %v, %q", c, r, m, tt.created, tt.ready, tt.msg)
			}
		})
	}
}
