package vmsnapshot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// The finalizers and labels of KubeVirt's snapshot controller.
const (
	// SnapshotFinalizer holds a VirtualMachineSnapshot until its source
	// is unlocked and its content dealt with.
	SnapshotFinalizer = "snapshot.kubevirt.io/vmsnapshot-protection"
	// ContentFinalizer holds a VirtualMachineSnapshotContent while its
	// snapshot exists.
	ContentFinalizer = "snapshot.kubevirt.io/vmsnapshotcontent-protection"
	// SourceFinalizer holds the VM while a snapshot of it is in progress.
	SourceFinalizer = "snapshot.kubevirt.io/snapshot-source-protection"
	// SourceNameLabel and SourceNamespaceLabel name the source VM on
	// each VolumeSnapshot.
	SourceNameLabel      = "snapshot.kubevirt.io/source-vm-name"
	SourceNamespaceLabel = "snapshot.kubevirt.io/source-vm-namespace"
)

// retry is how soon an unlocked source is tried again (KubeVirt's
// snapshotRetryInterval).
const retry = 5 * time.Second

// ContentName gives the content of a snapshot: its status's, else
// vmsnapshot-content-<UID> (KubeVirt's GetVMSnapshotContentName).
func ContentName(s *snapshotv1.VirtualMachineSnapshot) string {
	if s.Status != nil && s.Status.VirtualMachineSnapshotContentName != nil {
		return *s.Status.VirtualMachineSnapshotContentName
	}
	return "vmsnapshot-content-" + string(s.UID)
}

// VolumeSnapshotName gives the VolumeSnapshot of a snapshot's volume.
func VolumeSnapshotName(s *snapshotv1.VirtualMachineSnapshot, volume string) string {
	return fmt.Sprintf("vmsnapshot-%s-volume-%s", s.UID, volume)
}

// Reconciler drives VirtualMachineSnapshots and their contents.
type Reconciler struct {
	// Client reads through the manager's cache and writes.
	Client client.Client
	// APIReader lists pods uncached (a snapshot of a stopped VM waits
	// for pods using its claims), so that converge-controller keeps no
	// informer of every pod; nil uses Client.
	APIReader client.Reader
}

// source is the snapshot's VM as read for one pass.
type source struct {
	vm    *kubevirtv1.VirtualMachine
	vmi   *kubevirtv1.VirtualMachineInstance
	state SourceState
}

// Reconcile runs one pass over the VirtualMachineSnapshot req, as
// KubeVirt's updateVMSnapshot and updateVMSnapshotContent.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	snap := &snapshotv1.VirtualMachineSnapshot{}
	if err := r.Client.Get(ctx, req.NamespacedName, snap); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if snap.Spec.Source.Kind != "VirtualMachine" || (snap.Spec.Source.APIGroup != nil && *snap.Spec.Source.APIGroup != kubevirtv1.SchemeGroupVersion.Group) {
		return ctrl.Result{}, r.refuse(ctx, snap, fmt.Sprintf("spec.source: kind %q of API group %q cannot be snapshotted, want kind VirtualMachine of kubevirt.io",
			snap.Spec.Source.Kind, ptrString(snap.Spec.Source.APIGroup)))
	}
	now := time.Now()
	src, err := r.source(ctx, snap)
	if err != nil {
		return ctrl.Result{}, err
	}
	content, err := r.content(ctx, snap)
	if err != nil {
		return ctrl.Result{}, err
	}
	deleting := snap.DeletionTimestamp != nil
	terminating := deleting || DeadlineExceededAt(snap, now)
	if !terminating && !controllerutil.ContainsFinalizer(snap, SnapshotFinalizer) {
		patch := client.MergeFromWithOptions(snap.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(snap, SnapshotFinalizer)
		if err := r.Client.Patch(ctx, snap, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	var requeue time.Duration
	canRemoveFinalizer := true
	if snap.Status != nil && src != nil {
		if Progressing(snap) && !terminating {
			if !src.state.Locked {
				if err := r.lock(ctx, snap, src); err != nil {
					return ctrl.Result{}, err
				}
				requeue = retry
			} else if content == nil {
				if content, err = r.createContent(ctx, snap, src); err != nil {
					return ctrl.Result{}, err
				}
			}
			canRemoveFinalizer = false
		} else {
			if !Progressing(snap) || content == nil || !(deleteContentPolicy(snap) || !ContentReady(content)) {
				if err := r.unlock(ctx, snap, src); err != nil {
					return ctrl.Result{}, err
				}
			}
			canRemoveFinalizer = !src.state.Locked
		}
	}
	if terminating && content != nil {
		if err := r.releaseContent(ctx, content); err != nil {
			return ctrl.Result{}, err
		}
		if deleteContentPolicy(snap) || !ContentReady(content) {
			if err := r.Client.Delete(ctx, content); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
	} else if content != nil && content.DeletionTimestamp == nil {
		if err := r.reconcileContent(ctx, snap, content); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, snap, src, content, now); err != nil {
		return ctrl.Result{}, err
	}
	if deleting && canRemoveFinalizer && controllerutil.ContainsFinalizer(snap, SnapshotFinalizer) {
		patch := client.MergeFromWithOptions(snap.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(snap, SnapshotFinalizer)
		if err := r.Client.Patch(ctx, snap, patch); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
	}
	if requeue == 0 && Progressing(snap) {
		requeue = UntilDeadline(snap, now)
		if requeue < 0 {
			requeue = 0
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// deleteContentPolicy tells whether the content goes with the snapshot
// (deletionPolicy Delete, the default).
func deleteContentPolicy(s *snapshotv1.VirtualMachineSnapshot) bool {
	return s.Spec.DeletionPolicy == nil || *s.Spec.DeletionPolicy == snapshotv1.VirtualMachineSnapshotContentDelete
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// refuse fails a snapshot whose spec converge cannot take, naming why.
func (r *Reconciler) refuse(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, msg string) error {
	now := metav1.Now()
	st := &snapshotv1.VirtualMachineSnapshotStatus{ReadyToUse: new(bool)}
	if snap.Status != nil {
		st = snap.Status.DeepCopy()
	}
	st.Phase = snapshotv1.Failed
	st.Error = &snapshotv1.Error{Time: &now, Message: &msg}
	st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionFailure, corev1.ConditionTrue, msg, now))
	st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionProgressing, corev1.ConditionFalse, "Operation failed", now))
	st.Conditions = SetCondition(st.Conditions, Condition(snapshotv1.ConditionReady, corev1.ConditionFalse, "Not ready", now))
	if snap.Status != nil && snap.Status.Error != nil && snap.Status.Error.Message != nil && *snap.Status.Error.Message == msg {
		return nil
	}
	snap.Status = st
	return r.Client.Status().Update(ctx, snap)
}

// source reads the snapshot's VM and VMI; nil when the VM is gone.
func (r *Reconciler) source(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot) (*source, error) {
	key := types.NamespacedName{Namespace: snap.Namespace, Name: snap.Spec.Source.Name}
	vm := &kubevirtv1.VirtualMachine{}
	if err := r.Client.Get(ctx, key, vm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	s := &source{vm: vm}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	switch err := r.Client.Get(ctx, key, vmi); {
	case err == nil:
		s.vmi = vmi
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	s.state = SourceState{Exists: true, UID: vm.UID, Online: s.vmi != nil,
		Locked: vm.Status.SnapshotInProgress != nil && *vm.Status.SnapshotInProgress == snap.Name &&
			controllerutil.ContainsFinalizer(vm, SourceFinalizer),
		LockMsg: NotLockedMsg}
	if s.state.Locked {
		s.state.LockMsg = LockedMsg
	}
	if s.vmi != nil {
		for _, c := range s.vmi.Status.Conditions {
			switch c.Type {
			case kubevirtv1.VirtualMachineInstancePaused:
				s.state.Paused = c.Status == corev1.ConditionTrue
			case kubevirtv1.VirtualMachineInstanceAgentConnected:
				s.state.GuestAgent = true
			}
		}
	}
	return s, nil
}

// content reads the snapshot's content; nil when there is none.
func (r *Reconciler) content(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot) (*snapshotv1.VirtualMachineSnapshotContent, error) {
	c := &snapshotv1.VirtualMachineSnapshotContent{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: snap.Namespace, Name: ContentName(snap)}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return c, nil
}

// lock locks the source for snap once its claims are bound, populated
// and unused by pods while it is offline, and no other snapshot holds
// it (KubeVirt's vmSnapshotSource.Lock); otherwise src.state.LockMsg
// says why not.
func (r *Reconciler) lock(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, src *source) error {
	claims := Claims(src.vm)
	var names []string
	for _, c := range claims {
		if !slices.Contains(names, c) {
			names = append(names, c)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		why, err := r.claimNotReady(ctx, snap.Namespace, name)
		if err != nil {
			return err
		}
		if why != "" {
			src.state.LockMsg += fmt.Sprintf(" source %s/%s %s: %s", src.vm.Namespace, src.vm.Name, why, name)
			return nil
		}
	}
	if !src.state.Online && len(names) > 0 {
		pods := &corev1.PodList{}
		var reader client.Reader = r.Client
		if r.APIReader != nil {
			reader = r.APIReader
		}
		if err := reader.List(ctx, pods, client.InNamespace(snap.Namespace)); err != nil {
			return err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil && slices.Contains(names, v.PersistentVolumeClaim.ClaimName) {
					n++
					break
				}
			}
		}
		if n > 0 {
			src.state.LockMsg += fmt.Sprintf(" source is offline but %d pods using PVCs %v", n, names)
			return nil
		}
	}
	if p := src.vm.Status.SnapshotInProgress; p != nil && *p != snap.Name {
		src.state.LockMsg += fmt.Sprintf(" snapshot %q in progress", *p)
		return nil
	}
	if src.vm.Status.SnapshotInProgress == nil {
		patch := client.MergeFromWithOptions(src.vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		name := snap.Name
		src.vm.Status.SnapshotInProgress = &name
		if err := r.Client.Status().Patch(ctx, src.vm, patch); err != nil {
			return err
		}
	}
	if !controllerutil.ContainsFinalizer(src.vm, SourceFinalizer) {
		patch := client.MergeFromWithOptions(src.vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(src.vm, SourceFinalizer)
		if err := r.Client.Patch(ctx, src.vm, patch); err != nil {
			return err
		}
	}
	src.state.Locked, src.state.LockMsg = true, LockedMsg
	return nil
}

// claimNotReady says why a claim cannot be snapshotted yet (KubeVirt's
// verifyVolumes errors), or "".
func (r *Reconciler) claimNotReady(ctx context.Context, ns, name string) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return "volume doesnt exist", nil
		}
		return "", err
	}
	switch {
	case pvc.DeletionTimestamp != nil:
		return "volume is being deleted", nil
	case pvc.Status.Phase != corev1.ClaimBound:
		return "volume not bound", nil
	}
	if owner := metav1.GetControllerOf(pvc); owner != nil && owner.Kind == "DataVolume" {
		dv := &cdiv1.DataVolume{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: owner.Name}, dv); err != nil {
			if apierrors.IsNotFound(err) {
				return "volume not populated", nil
			}
			return "", err
		}
		if dv.Status.Phase != cdiv1.Succeeded {
			return "volume not populated", nil
		}
	}
	return "", nil
}

// unlock releases the source if snap holds it (KubeVirt's Unlock).
func (r *Reconciler) unlock(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, src *source) error {
	if p := src.vm.Status.SnapshotInProgress; p == nil || *p != snap.Name {
		return nil
	}
	if controllerutil.ContainsFinalizer(src.vm, SourceFinalizer) {
		patch := client.MergeFromWithOptions(src.vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(src.vm, SourceFinalizer)
		if err := r.Client.Patch(ctx, src.vm, patch); err != nil {
			return err
		}
	}
	patch := client.MergeFromWithOptions(src.vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	src.vm.Status.SnapshotInProgress = nil
	if err := r.Client.Status().Patch(ctx, src.vm, patch); err != nil {
		return err
	}
	src.state.Locked = false
	return nil
}

// snapshotClassOf gives the VolumeSnapshotClass for a StorageClass's
// volumes ("" when it has none or does not exist).
func (r *Reconciler) snapshotClassOf(ctx context.Context, storageClass string) (string, error) {
	sc := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: storageClass}, sc); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	classes := &snapv1.VolumeSnapshotClassList{}
	if err := r.Client.List(ctx, classes); err != nil {
		return "", err
	}
	return SnapshotClass(sc.Provisioner, classes.Items)
}

// createContent creates the snapshot's content: the VM's metadata and
// spec, and a volume backup for each claim that is bound and whose
// StorageClass has a VolumeSnapshotClass (KubeVirt's createContent and
// getSnapshotPVC).
func (r *Reconciler) createContent(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, src *source) (*snapshotv1.VirtualMachineSnapshotContent, error) {
	claims := Claims(src.vm)
	var backups []snapshotv1.VolumeBackup
	for _, v := range src.vm.Spec.Template.Spec.Volumes {
		name, ok := claims[v.Name]
		if !ok {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: snap.Namespace, Name: name}, pvc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.StorageClassName == nil {
			continue
		}
		class, err := r.snapshotClassOf(ctx, *pvc.Spec.StorageClassName)
		if err != nil {
			return nil, err
		}
		if class == "" {
			continue
		}
		vsName := VolumeSnapshotName(snap, v.Name)
		meta := pvc.ObjectMeta.DeepCopy()
		meta.ManagedFields = nil
		backups = append(backups, snapshotv1.VolumeBackup{VolumeName: v.Name,
			PersistentVolumeClaim: snapshotv1.PersistentVolumeClaim{ObjectMeta: *meta, Spec: *pvc.Spec.DeepCopy()},
			VolumeSnapshotName:    &vsName})
	}
	meta := src.vm.ObjectMeta.DeepCopy()
	meta.ManagedFields = nil
	snapName := snap.Name
	c := &snapshotv1.VirtualMachineSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: ContentName(snap), Namespace: snap.Namespace, Finalizers: []string{ContentFinalizer}},
		Spec: snapshotv1.VirtualMachineSnapshotContentSpec{VirtualMachineSnapshotName: &snapName,
			Source:        snapshotv1.SourceSpec{VirtualMachine: &snapshotv1.VirtualMachine{ObjectMeta: *meta, Spec: *src.vm.Spec.DeepCopy()}},
			VolumeBackups: backups},
	}
	if err := r.Client.Create(ctx, c); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return r.content(ctx, snap)
		}
		return nil, err
	}
	return c, nil
}

// releaseContent removes the content's finalizer (its snapshot is going
// or failed).
func (r *Reconciler) releaseContent(ctx context.Context, c *snapshotv1.VirtualMachineSnapshotContent) error {
	if !controllerutil.ContainsFinalizer(c, ContentFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(c, ContentFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, c, patch))
}

// reconcileContent creates the content's missing VolumeSnapshots and
// writes its status from theirs (KubeVirt's updateVMSnapshotContent;
// freezing is a no-op: converge has no guest agent channel).
func (r *Reconciler) reconcileContent(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, c *snapshotv1.VirtualMachineSnapshotContent) error {
	created := c.Status != nil && c.Status.CreationTime != nil
	var statuses []snapshotv1.VolumeSnapshotStatus
	var missing []string
	for _, b := range c.Spec.VolumeBackups {
		if b.VolumeSnapshotName == nil {
			continue
		}
		vs := &snapv1.VolumeSnapshot{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: *b.VolumeSnapshotName}, vs)
		switch {
		case apierrors.IsNotFound(err) && created:
			missing = append(missing, *b.VolumeSnapshotName)
			continue
		case apierrors.IsNotFound(err):
			if vs, err = r.createVolumeSnapshot(ctx, c, b); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		s := snapshotv1.VolumeSnapshotStatus{VolumeSnapshotName: vs.Name}
		if vs.Status != nil {
			s.ReadyToUse, s.CreationTime = vs.Status.ReadyToUse, vs.Status.CreationTime
			if vs.Status.Error != nil {
				s.Error = &snapshotv1.Error{Message: vs.Status.Error.Message, Time: vs.Status.Error.Time}
			}
		}
		statuses = append(statuses, s)
	}
	next := c.DeepCopy()
	if next.Status == nil {
		next.Status = &snapshotv1.VirtualMachineSnapshotContentStatus{}
	}
	isCreated, ready, msg := ContentProgress(statuses, missing)
	now := metav1.Now()
	if isCreated && next.Status.CreationTime == nil {
		next.Status.CreationTime = &now
	}
	switch {
	case msg != "" && !ready:
		if next.Status.Error == nil || next.Status.Error.Message == nil || *next.Status.Error.Message != msg {
			next.Status.Error = &snapshotv1.Error{Time: &now, Message: &msg}
		}
	case msg == "":
		next.Status.Error = nil
	}
	next.Status.ReadyToUse = &ready
	next.Status.VolumeSnapshotStatus = statuses
	if equality.Semantic.DeepEqual(c.Status, next.Status) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, next); err != nil {
		return err
	}
	*c = *next
	return nil
}

// ContentProgress gives whether every VolumeSnapshot was created (has a
// creationTime), whether all are readyToUse, and the error to report, from
// their statuses and the names of those gone after the content was
// created, as KubeVirt's updateVMSnapshotContent.
func ContentProgress(statuses []snapshotv1.VolumeSnapshotStatus, missing []string) (created, ready bool, msg string) {
	if len(missing) > 0 {
		return false, false, fmt.Sprintf("VolumeSnapshots (%s) missing", strings.Join(missing, ","))
	}
	created, ready = true, true
	for _, s := range statuses {
		if s.CreationTime == nil {
			created = false
		}
		if s.ReadyToUse == nil || !*s.ReadyToUse {
			ready = false
		}
		if s.Error != nil && s.Error.Message != nil {
			msg = fmt.Sprintf("VolumeSnapshot %s error: %s", s.VolumeSnapshotName, *s.Error.Message)
			break
		}
	}
	return created, ready, msg
}

// createVolumeSnapshot creates a backup's VolumeSnapshot, owned by the
// content (KubeVirt's createVolumeSnapshot).
func (r *Reconciler) createVolumeSnapshot(ctx context.Context, c *snapshotv1.VirtualMachineSnapshotContent, b snapshotv1.VolumeBackup) (*snapv1.VolumeSnapshot, error) {
	sc := b.PersistentVolumeClaim.Spec.StorageClassName
	if sc == nil {
		return nil, fmt.Errorf("%s/%s VolumeSnapshot requested but no storage class", c.Namespace, b.PersistentVolumeClaim.Name)
	}
	class, err := r.snapshotClassOf(ctx, *sc)
	if err != nil {
		return nil, err
	}
	if class == "" {
		return nil, fmt.Errorf("no VolumeSnapshotClass for StorageClass %s of volume %s", *sc, b.VolumeName)
	}
	vm := c.Spec.Source.VirtualMachine
	t := true
	claim := b.PersistentVolumeClaim.Name
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: *b.VolumeSnapshotName, Namespace: c.Namespace,
			Labels: map[string]string{SourceNameLabel: vm.Name, SourceNamespaceLabel: vm.Namespace},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: snapshotv1.SchemeGroupVersion.String(), Kind: "VirtualMachineSnapshotContent",
				Name: c.Name, UID: c.UID, Controller: &t, BlockOwnerDeletion: &t}}},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}, VolumeSnapshotClassName: &class},
	}
	if err := r.Client.Create(ctx, vs); err != nil {
		return nil, err
	}
	return vs, nil
}

// writeStatus writes the snapshot's status (NextStatus) when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, snap *snapshotv1.VirtualMachineSnapshot, src *source, content *snapshotv1.VirtualMachineSnapshotContent, now time.Time) error {
	var state SourceState
	if src != nil {
		state = src.state
	}
	var included, excluded []string
	var partial bool
	if content != nil {
		backed := map[string]bool{}
		for _, b := range content.Spec.VolumeBackups {
			backed[b.VolumeName] = true
		}
		if vm := content.Spec.Source.VirtualMachine; vm != nil {
			included, excluded, partial = SplitVolumes(&kubevirtv1.VirtualMachine{Spec: vm.Spec}, backed)
		}
	}
	st := NextStatus(snap, state, content, included, excluded, partial, now)
	if snap.Status != nil && equality.Semantic.DeepEqual(snap.Status, st) {
		return nil
	}
	next := snap.DeepCopy()
	next.Status = st
	if err := r.Client.Status().Update(ctx, next); err != nil {
		return client.IgnoreNotFound(err)
	}
	*snap = *next
	return nil
}
