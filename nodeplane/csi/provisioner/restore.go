package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// snapshotSource reads VolumeSnapshot name in the claim's namespace and
// its bound VolumeSnapshotContent and gives the snapshot as the content
// source (restore), as csi-provisioner's getSnapshotSource. Without a
// snapshot client the claim is refused (InvalidArgument).
func (p *Provisioner) snapshotSource(ctx context.Context, claim *corev1.PersistentVolumeClaim, name string) (*csi.VolumeContentSource, controller.ProvisioningState, error) {
	what := fmt.Sprintf("PersistentVolumeClaim %s/%s: data source VolumeSnapshot %s", claim.Namespace, claim.Name, name)
	if p.opts.Snapshots == nil {
		return nil, controller.ProvisioningFinished, status.Errorf(codes.InvalidArgument, "%s: restoring a snapshot is not configured in this provisioner (no snapshot.storage.k8s.io client)", what)
	}
	snap, err := p.opts.Snapshots.SnapshotV1().VolumeSnapshots(claim.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, controller.ProvisioningNoChange, status.Errorf(codes.FailedPrecondition, "%s: not found", what)
	} else if err != nil {
		return nil, controller.ProvisioningNoChange, status.Errorf(codes.FailedPrecondition, "%s: %v", what, err)
	}
	var content *snapv1.VolumeSnapshotContent
	if snap.Status != nil && snap.Status.BoundVolumeSnapshotContentName != nil {
		content, err = p.opts.Snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, *snap.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil {
			return nil, controller.ProvisioningNoChange, status.Errorf(codes.FailedPrecondition, "%s: VolumeSnapshotContent %s: %v", what, *snap.Status.BoundVolumeSnapshotContentName, err)
		}
	}
	return restoreSource(what, claim, snap, content, p.driver)
}

// restoreSource checks a claim's VolumeSnapshot and its bound
// VolumeSnapshotContent (nil when unbound) as csi-provisioner's
// getSnapshotSource and gives the snapshot handle as the content source.
// Retried (FailedPrecondition, ProvisioningNoChange): a snapshot being
// deleted, unbound, whose content is not bound back to it, without a
// snapshot handle, or not readyToUse. Final (InvalidArgument): a content
// of another driver, a request smaller than the restore size.
func restoreSource(what string, claim *corev1.PersistentVolumeClaim, snap *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent, driver string) (*csi.VolumeContentSource, controller.ProvisioningState, error) {
	retry := func(format string, a ...any) (*csi.VolumeContentSource, controller.ProvisioningState, error) {
		return nil, controller.ProvisioningNoChange, status.Errorf(codes.FailedPrecondition, what+": "+format, a...)
	}
	final := func(format string, a ...any) (*csi.VolumeContentSource, controller.ProvisioningState, error) {
		return nil, controller.ProvisioningFinished, status.Errorf(codes.InvalidArgument, what+": "+format, a...)
	}
	if snap.DeletionTimestamp != nil {
		return retry("is being deleted")
	}
	if content == nil {
		return retry("not bound to a VolumeSnapshotContent")
	}
	if ref := content.Spec.VolumeSnapshotRef; ref.Name != snap.Name || ref.Namespace != snap.Namespace || (ref.UID != "" && ref.UID != snap.UID) {
		return retry("VolumeSnapshotContent %s is bound to %s/%s, not to it", content.Name, ref.Namespace, ref.Name)
	}
	if content.Spec.Driver != driver {
		return final("VolumeSnapshotContent %s is of driver %s, not %s", content.Name, content.Spec.Driver, driver)
	}
	if content.Status == nil || content.Status.SnapshotHandle == nil || *content.Status.SnapshotHandle == "" {
		return retry("VolumeSnapshotContent %s has no snapshot handle yet", content.Name)
	}
	if snap.Status == nil || snap.Status.ReadyToUse == nil || !*snap.Status.ReadyToUse {
		return retry("not ready to use")
	}
	if rs := snap.Status.RestoreSize; rs != nil {
		if want := claim.Spec.Resources.Requests[corev1.ResourceStorage]; want.Cmp(*rs) < 0 {
			return final("requested volume size %s is less than the size %s for the source snapshot", want.String(), rs.String())
		}
	}
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: *content.Status.SnapshotHandle}}}, controller.ProvisioningFinished, nil
}
