package vmsnapshot

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
)

// The reasons and messages of KubeVirt's snapshot status (snapshot.go,
// source.go).
const (
	// DeadlineExceeded is the Failure condition's reason once
	// spec.failureDeadline has passed.
	DeadlineExceeded = "snapshot deadline exceeded"
	// LockedMsg and NotLockedMsg are the Progressing reasons while the
	// source is locked or not.
	LockedMsg    = "Source locked and operation in progress"
	NotLockedMsg = "Source not locked"
)

// IndicationMessages are KubeVirt's messages of the source indications
// (snapshot.go snapshotIndicationMessages).
var IndicationMessages = map[snapshotv1.Indication]string{
	snapshotv1.VMSnapshotOnlineSnapshotIndication:  "Snapshot taken while the VM was running. Consistency depends on guest-agent quiescing.",
	snapshotv1.VMSnapshotGuestAgentIndication:      "Guest agent was active and attempted to quiesce the filesystem for application consistency.",
	snapshotv1.VMSnapshotNoGuestAgentIndication:    "Guest agent was not available. Snapshot is crash-consistent and may not be application-consistent.",
	snapshotv1.VMSnapshotQuiesceTimeoutIndication:  "Guest agent quiesced the filesystem, but the freeze window timed out before completion. Snapshot is crash-consistent and may not be application-consistent.",
	snapshotv1.VMSnapshotPausedIndication:          "Snapshot taken while the VM was paused. Snapshot is crash-consistent and may not be application-consistent.",
	snapshotv1.VMSnapshotPartialSnapshotIndication: "Not all snapshotable volumes were included in the snapshot. Check status.snapshotVolumes for excluded volumes and VM VolumeSnapshotStatus for details.",
}

// Condition gives a condition of type t with status s and reason, its
// transition at now (KubeVirt's newReadyCondition and siblings).
func Condition(t snapshotv1.ConditionType, s corev1.ConditionStatus, reason string, now metav1.Time) snapshotv1.Condition {
	return snapshotv1.Condition{Type: t, Status: s, Reason: reason, LastTransitionTime: now}
}

// SetCondition sets c in conds, replacing a condition of its type only
// when its status or reason changed (so the transition time stays), as
// KubeVirt's updateCondition; it gives the new list.
func SetCondition(conds []snapshotv1.Condition, c snapshotv1.Condition) []snapshotv1.Condition {
	for i := range conds {
		if conds[i].Type == c.Type {
			if conds[i].Status != c.Status || conds[i].Reason != c.Reason {
				conds[i] = c
			}
			return conds
		}
	}
	return append(conds, c)
}

// HasCondition tells whether conds hold a condition of type t.
func HasCondition(conds []snapshotv1.Condition, t snapshotv1.ConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return true
		}
	}
	return false
}

// Ready tells whether a snapshot is readyToUse.
func Ready(s *snapshotv1.VirtualMachineSnapshot) bool {
	return s.Status != nil && s.Status.ReadyToUse != nil && *s.Status.ReadyToUse
}

// Failed tells whether a snapshot is in phase Failed.
func Failed(s *snapshotv1.VirtualMachineSnapshot) bool {
	return s.Status != nil && s.Status.Phase == snapshotv1.Failed
}

// Succeeded tells whether a snapshot is in phase Succeeded.
func Succeeded(s *snapshotv1.VirtualMachineSnapshot) bool {
	return s.Status != nil && s.Status.Phase == snapshotv1.Succeeded
}

// Progressing tells whether a snapshot has not ended (neither Failed nor
// Succeeded).
func Progressing(s *snapshotv1.VirtualMachineSnapshot) bool {
	return !Failed(s) && !Succeeded(s)
}

// ContentReady tells whether a content is readyToUse.
func ContentReady(c *snapshotv1.VirtualMachineSnapshotContent) bool {
	return c.Status != nil && c.Status.ReadyToUse != nil && *c.Status.ReadyToUse
}

// FailureDeadline gives spec.failureDeadline, or KubeVirt's default
// (5 min); 0 means none.
func FailureDeadline(s *snapshotv1.VirtualMachineSnapshot) time.Duration {
	if s.Spec.FailureDeadline != nil {
		return s.Spec.FailureDeadline.Duration
	}
	return snapshotv1.DefaultFailureDeadline
}

// UntilDeadline gives the time left at now before the snapshot's failure
// deadline (0 when it has none), as KubeVirt's timeUntilDeadline.
func UntilDeadline(s *snapshotv1.VirtualMachineSnapshot, now time.Time) time.Duration {
	d := FailureDeadline(s)
	if d == 0 {
		return 0
	}
	return s.CreationTimestamp.Add(d).Sub(now)
}

// DeadlineExceededAt tells whether the snapshot failed or, still
// progressing, passed its deadline at now (vmSnapshotDeadlineExceeded).
func DeadlineExceededAt(s *snapshotv1.VirtualMachineSnapshot, now time.Time) bool {
	if Failed(s) {
		return true
	}
	if !Progressing(s) {
		return false
	}
	return FailureDeadline(s) != 0 && UntilDeadline(s, now) < 0
}

// SourceState is what the snapshot's status says of its source VM.
type SourceState struct {
	// Exists: the VM exists.
	Exists bool
	// UID is the VM's.
	UID types.UID
	// Locked: the VM's status.snapshotInProgress names this snapshot and
	// it carries the source finalizer.
	Locked bool
	// LockMsg is the Progressing reason while in progress (LockedMsg,
	// NotLockedMsg and why).
	LockMsg string
	// Online: the VM has a VMI; Paused: its Paused condition is True;
	// GuestAgent: it has an AgentConnected condition.
	Online, Paused, GuestAgent bool
}

// Indications gives the source indications of a snapshot of a VM in
// state s (KubeVirt's updateSnapshotSourceIndications): none offline;
// Online and Paused, GuestAgent or NoGuestAgent when running, sorted.
func Indications(s SourceState) []snapshotv1.Indication {
	if !s.Online {
		return nil
	}
	out := []snapshotv1.Indication{snapshotv1.VMSnapshotOnlineSnapshotIndication}
	switch {
	case s.Paused:
		out = append(out, snapshotv1.VMSnapshotPausedIndication)
	case s.GuestAgent:
		out = append(out, snapshotv1.VMSnapshotGuestAgentIndication)
	default:
		out = append(out, snapshotv1.VMSnapshotNoGuestAgentIndication)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// SourceIndications gives each indication with its message.
func SourceIndications(ind []snapshotv1.Indication) []snapshotv1.SourceIndication {
	var out []snapshotv1.SourceIndication
	for _, i := range ind {
		out = append(out, snapshotv1.SourceIndication{Indication: i, Message: IndicationMessages[i]})
	}
	return out
}

// NextStatus computes a snapshot's status from its current one, its
// source, its content (nil when none) and, once Succeeded, the volumes
// split (SplitVolumes), at now, as KubeVirt's updateSnapshotStatus:
// Failed past the deadline, Succeeded once the content has a
// creationTime, else InProgress (Deleting when being deleted), the
// Progressing and Ready conditions, indications while in progress.
func NextStatus(s *snapshotv1.VirtualMachineSnapshot, src SourceState, content *snapshotv1.VirtualMachineSnapshotContent, included, excluded []string, partial bool, now time.Time) *snapshotv1.VirtualMachineSnapshotStatus {
	mnow := metav1.NewTime(now)
	st := &snapshotv1.VirtualMachineSnapshotStatus{ReadyToUse: new(bool)}
	if s.Status != nil {
		st = s.Status.DeepCopy()
	}
	if src.Exists {
		uid := src.UID
		st.SourceUID = &uid
	}
	if content != nil && content.Status != nil {
		name := content.Name
		st.VirtualMachineSnapshotContentName = &name
		st.CreationTime = content.Status.CreationTime
		st.ReadyToUse = content.Status.ReadyToUse
		st.Error = content.Status.Error
	}
	probe := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: s.ObjectMeta, Spec: s.Spec, Status: st}
	switch {
	case DeadlineExceededAt(probe, now):
		st.Phase = snapshotv1.Failed
		st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionFailure, corev1.ConditionTrue, DeadlineExceeded, mnow))
		st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Operation failed", mnow))
	case Succeeded(probe) || st.CreationTime != nil:
		st.Phase = snapshotv1.Succeeded
		st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Operation complete", mnow))
		if content != nil {
			st.SnapshotVolumes = &snapshotv1.SnapshotVolumesLists{IncludedVolumes: included, ExcludedVolumes: excluded}
			if partial {
				addPartial(st)
			}
		}
	default:
		st.Phase = snapshotv1.InProgress
		if src.Exists {
			cs := corev1.ConditionFalse
			if src.Locked {
				cs = corev1.ConditionTrue
			}
			st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionProgressing, cs, src.LockMsg, mnow))
			ind := Indications(src)
			st.Indications = ind
			st.SourceIndications = SourceIndications(ind)
		} else {
			st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Source does not exist", mnow))
		}
		if s.DeletionTimestamp != nil {
			st.Phase = snapshotv1.Deleting
			st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionProgressing, corev1.ConditionFalse, "VM snapshot is deleting", mnow))
		}
	}
	if st.ReadyToUse != nil && *st.ReadyToUse {
		st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionReady, corev1.ConditionTrue, "Ready", mnow))
	} else {
		st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionReady, corev1.ConditionFalse, "Not ready", mnow))
	}
	if st.Error != nil {
		st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionProgressing, corev1.ConditionFalse, "In error state", mnow))
	}
	return st
}

// addPartial adds the PartialSnapshot indication once.
func addPartial(st *snapshotv1.VirtualMachineSnapshotStatus) {
	for _, i := range st.SourceIndications {
		if i.Indication == snapshotv1.VMSnapshotPartialSnapshotIndication {
			return
		}
	}
	st.SourceIndications = append(st.SourceIndications, snapshotv1.SourceIndication{
		Indication: snapshotv1.VMSnapshotPartialSnapshotIndication,
		Message:    IndicationMessages[snapshotv1.VMSnapshotPartialSnapshotIndication]})
	for _, i := range st.Indications {
		if i == snapshotv1.VMSnapshotPartialSnapshotIndication {
			return
		}
	}
	st.Indications = append(st.Indications, snapshotv1.VMSnapshotPartialSnapshotIndication)
}
