package vm

import (
	"context"
	"errors"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/operators/cdi/cloneauth"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// AllowClaimAdoptionAnnotation is the annotation KubeVirt puts on the
// DataVolumes it creates from dataVolumeTemplates (kubevirt
// pkg/storage/types/pvc.go allowClaimAdoptionAnnotation): CDI may adopt
// an existing PVC of the DataVolume's name. converge's DataVolume
// controller (operators/cdi/datavolume) does not adopt claims: it reports
// such a DataVolume Pending with Bound=False, reason ClaimNotOwned.
const AllowClaimAdoptionAnnotation = "cdi.kubevirt.io/allowClaimAdoption"

// NewDataVolume gives the DataVolume of dataVolumeTemplates[i] of vm, as
// KubeVirt's CreateDataVolumeManifest (pkg/virt-controller/watch/util/
// util.go) over GenerateDataVolumeFromTemplate (pkg/storage/types/dv.go):
// the template's metadata (name, labels, annotations) and spec, in the
// VM's namespace, with the label kubevirt.io/created-by=<VM UID>, the
// annotation AllowClaimAdoptionAnnotation=true, the VMI template's
// priorityClassName when the DataVolume sets none, and a controller owner
// reference to vm. The spec is taken as it is: a spec.sourceRef is
// resolved by the DataVolume controller (operators/cdi/datavolume), as
// CDI does. A template in another namespace than the VM's is an
// error naming the field (KubeVirt's create would fail on it).
func NewDataVolume(vm *kubevirtv1.VirtualMachine, i int) (*cdiv1.DataVolume, error) {
	t := &vm.Spec.DataVolumeTemplates[i]
	if t.Namespace != "" && t.Namespace != vm.Namespace {
		return nil, fmt.Errorf("spec.dataVolumeTemplates[%d].metadata.namespace %q: a VirtualMachine's DataVolumes live in its namespace %q", i, t.Namespace, vm.Namespace)
	}
	dv := &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: t.Name, Namespace: vm.Namespace,
			Labels: maps.Clone(t.Labels), Annotations: maps.Clone(t.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if dv.Labels == nil {
		dv.Labels = map[string]string{}
	}
	if dv.Annotations == nil {
		dv.Annotations = map[string]string{}
	}
	dv.Labels[kubevirtv1.CreatedByLabel] = string(vm.UID)
	dv.Annotations[AllowClaimAdoptionAnnotation] = "true"
	if tmpl := vm.Spec.Template; dv.Spec.PriorityClassName == "" && tmpl != nil && tmpl.Spec.PriorityClassName != "" {
		dv.Spec.PriorityClassName = tmpl.Spec.PriorityClassName
	}
	return dv, nil
}

// waitForDataVolumes is the VM controller's DataVolume step, after
// KubeVirt's vm.go (execute: ClaimMatchedDataVolumes; sync and startVMI:
// handleDataVolumes), run before act, the action Reconcile chose, is
// taken. It adopts each orphan DataVolume named by a dataVolumeTemplate
// (claimDataVolumes) and, unless the VM is annotated
// kubevirt.io/immediate-data-volume-creation: "false" (then only when act
// is Create), creates the missing ones (handleDataVolumes). It says
// whether act must wait: when a DataVolume is not ready, KubeVirt takes no
// run-strategy action at all unless the VM is Halted, and never starts a
// VMI. An error (reading, adopting or creating a DataVolume) waits too,
// worded as KubeVirt's sync error.
func (r *Reconciler) waitForDataVolumes(ctx context.Context, vm *kubevirtv1.VirtualMachine, act Action) (bool, error) {
	if len(vm.Spec.DataVolumeTemplates) == 0 {
		return false, nil
	}
	if err := r.claimDataVolumes(ctx, vm); err != nil {
		return true, err
	}
	immediate := vm.Annotations[kubevirtv1.ImmediateDataVolumeCreation] != "false"
	if !immediate && act != Create {
		return false, nil
	}
	ready, err := r.handleDataVolumes(ctx, vm)
	if err != nil {
		return true, fmt.Errorf("Error encountered while creating DataVolumes: %w", err) //nolint:staticcheck // KubeVirt's message
	}
	if ready {
		return false, nil
	}
	return act == Create || (immediate && vmstate.RunStrategy(vm) != kubevirtv1.RunStrategyHalted), nil
}

// handleDataVolumes creates the DataVolume of each dataVolumeTemplate of
// vm that does not exist (NewDataVolume) and says whether they are all
// ready, as KubeVirt's handleDataVolumes: a DataVolume is ready in phase
// Succeeded, WaitForFirstConsumer or PendingPopulation (the VMI is then
// created; converge's VMI scheduler still waits for the volume to be
// populated and bound, as KubeVirt's VMI controller waits before creating
// the virt-launcher pod). An existing DataVolume is used whoever owns it;
// its spec is not compared with the template (KubeVirt neither updates
// nor recreates it).
func (r *Reconciler) handleDataVolumes(ctx context.Context, vm *kubevirtv1.VirtualMachine) (bool, error) {
	ready := true
	for i := range vm.Spec.DataVolumeTemplates {
		name := vm.Spec.DataVolumeTemplates[i].Name
		cur := &cdiv1.DataVolume{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: vm.Namespace, Name: name}, cur)
		switch {
		case apierrors.IsNotFound(err):
			ready = false
			dv, err := NewDataVolume(vm, i)
			if err != nil {
				return false, fmt.Errorf("unable to create DataVolume manifest: %w", err)
			}
			if err := r.authorizeDataVolume(ctx, vm, dv); err != nil {
				return false, fmt.Errorf("not authorized to create DataVolume: %w", err)
			}
			if err := r.Client.Create(ctx, dv); err != nil && !apierrors.IsAlreadyExists(err) {
				return false, fmt.Errorf("failed to create DataVolume: %w", err)
			}
		case err != nil:
			return false, fmt.Errorf("DataVolume %s/%s: %w", vm.Namespace, name, err)
		default:
			switch cur.Status.Phase {
			case cdiv1.Succeeded, cdiv1.WaitForFirstConsumer, cdiv1.PendingPopulation:
			default:
				ready = false
			}
		}
	}
	return ready, nil
}

// claimDataVolumes adopts the DataVolumes named by vm's
// dataVolumeTemplates that no controller owns and that are not being
// deleted, as KubeVirt's ClaimMatchedDataVolumes
// (pkg/controller/controller_ref_manager.go; its selector matches every
// such DataVolume): it adds a controller owner reference to vm, after
// checking with an uncached read (APIReader) that vm is the same VM and
// not being deleted (KubeVirt's RecheckDeletionTimestamp). A DataVolume
// another object controls is left as it is.
func (r *Reconciler) claimDataVolumes(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	rechecked := false
	for i := range vm.Spec.DataVolumeTemplates {
		key := types.NamespacedName{Namespace: vm.Namespace, Name: vm.Spec.DataVolumeTemplates[i].Name}
		dv := &cdiv1.DataVolume{}
		if err := r.Client.Get(ctx, key, dv); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("DataVolume %s: %w", key, err)
		}
		if metav1.GetControllerOf(dv) != nil || dv.DeletionTimestamp != nil {
			continue
		}
		if !rechecked {
			if err := r.canAdopt(ctx, vm); err != nil {
				return fmt.Errorf("can't adopt DataVolume %s (%s): %w", key, dv.UID, err)
			}
			rechecked = true
		}
		patch := client.MergeFromWithOptions(dv.DeepCopy(), client.MergeFromWithOptimisticLock{})
		dv.OwnerReferences = append(dv.OwnerReferences, *metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind))
		if err := r.Client.Patch(ctx, dv, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("adopting DataVolume %s: %w", key, err)
		}
	}
	return nil
}

// authorizeDataVolume refuses dv, a DataVolume of vm's templates that
// clones from another namespace, unless vm's ServiceAccount (the last
// serviceAccount volume of its template, else "default") may clone its
// source, as KubeVirt's authorizeDataVolume (pkg/virt-controller/watch/
// vm.go: cdiv1 DataVolume.AuthorizeSA, SubjectAccessReviews through
// cloneauth.Proxy); the error is CDI's reason. A DataSource of vm's own
// namespace that does not exist yet is let through (its DataVolume waits
// for it, CloneWithoutSource).
func (r *Reconciler) authorizeDataVolume(ctx context.Context, vm *kubevirtv1.VirtualMachine, dv *cdiv1.DataVolume) error {
	sa := "default"
	if vm.Spec.Template != nil {
		for _, v := range vm.Spec.Template.Spec.Volumes {
			if v.ServiceAccount != nil {
				sa = v.ServiceAccount.ServiceAccountName
			}
		}
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	resp, err := dv.AuthorizeSA(vm.Namespace, vm.Name, cloneauth.Proxy{Ctx: ctx, Client: r.Client, Reader: reader}, vm.Namespace, sa)
	switch {
	case errors.Is(err, cdiv1.ErrNoTokenOkay):
		return nil
	case apierrors.IsNotFound(err) && dv.Spec.SourceRef != nil && (dv.Spec.SourceRef.Namespace == nil || *dv.Spec.SourceRef.Namespace == "" || *dv.Spec.SourceRef.Namespace == vm.Namespace):
		return nil // a clone within the namespace: the DataVolume waits for its DataSource
	case err != nil:
		return err
	case !resp.Allowed:
		return errors.New(resp.Reason)
	}
	return nil
}

// canAdopt reads vm afresh (APIReader, else Client) and fails when it is
// gone, replaced (another UID) or being deleted.
func (r *Reconciler) canAdopt(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	fresh := &kubevirtv1.VirtualMachine{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(vm), fresh); err != nil {
		return err
	}
	if fresh.UID != vm.UID {
		return fmt.Errorf("original VirtualMachine %s/%s is gone: got uid %s, wanted %s", vm.Namespace, vm.Name, fresh.UID, vm.UID)
	}
	if fresh.DeletionTimestamp != nil {
		return fmt.Errorf("VirtualMachine %s/%s has just been deleted at %v", vm.Namespace, vm.Name, fresh.DeletionTimestamp)
	}
	return nil
}
