package resizer

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/nodeplane/csi/provisioner"
)

// plan gives the size to expand a volume of pvSize bytes to for a
// request of req: req, or pvSize when req is smaller (volumes do not
// shrink; shrink reports that case).
func plan(req, pvSize resource.Quantity) (target resource.Quantity, shrink bool) {
	if req.Cmp(pvSize) < 0 {
		return pvSize, true
	}
	return req, false
}

// sync expands claim key (namespace/name) when it asks for more than its
// capacity and its volume is this node's (see the package comment). It
// returns an error to retry the claim later.
func (r *Resizer) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := r.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	req, cur := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || req.Cmp(cur) <= 0 {
		return nil
	}
	pv, err := r.volumes.Get(pvc.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.driver || !provisioner.OnNode(pv, r.segments) {
		return nil // another driver's or another node's volume
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID || ref.Namespace != pvc.Namespace {
		return nil
	}
	pvSize := pv.Spec.Capacity[corev1.ResourceStorage]
	if pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending && pvSize.Cmp(req) >= 0 {
		return nil // handed to the kubelet (see markNodePending)
	}
	className := ""
	if pvc.Spec.StorageClassName != nil {
		className = *pvc.Spec.StorageClassName
	}
	class, err := r.classes.Get(className)
	if err != nil || class.AllowVolumeExpansion == nil || !*class.AllowVolumeExpansion {
		r.events.Eventf(pvc, corev1.EventTypeWarning, ReasonResizeFailed, "StorageClass %q does not allow volume expansion (allowVolumeExpansion: true); volume %s stays at %s", className, pv.Name, pvSize.String())
		return nil
	}
	target, shrink := plan(req, pvSize)
	if shrink {
		r.events.Eventf(pvc, corev1.EventTypeWarning, ReasonResizeFailed, "volume %s is %s already; it cannot shrink to the %s requested, volumes do not shrink: the claim gets %s", pv.Name, pvSize.String(), req.String(), pvSize.String())
	}
	return r.expand(ctx, pvc, pv, target)
}

// expand runs the expansion of pvc's volume pv to target: mark in
// progress, ControllerExpandVolume, PV capacity, NodeExpandVolume when the
// driver asks for it, mark finished (or node pending when the node step
// failed). A failure is recorded on the PVC and returned.
func (r *Resizer) expand(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, target resource.Quantity) error {
	pvc, err := r.updateStatus(ctx, pvc, func(st *corev1.PersistentVolumeClaimStatus) { markInProgress(st, target) })
	if err != nil {
		return err
	}
	r.events.Eventf(pvc, corev1.EventTypeNormal, ReasonResizing, "External resizer is resizing volume %s", pv.Name)
	volCap := capability(pv)
	resp, err := r.opts.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId:         pv.Spec.CSI.VolumeHandle,
		CapacityRange:    &csi.CapacityRange{RequiredBytes: target.Value()},
		VolumeCapability: volCap,
	})
	if err != nil {
		msg := fmt.Sprintf("resize volume %q by resizer %q failed: %v", pv.Name, r.driver, err)
		r.events.Event(pvc, corev1.EventTypeWarning, ReasonResizeFailed, msg)
		c := status.Code(err)
		infeasible := c == codes.InvalidArgument || c == codes.OutOfRange
		if _, uerr := r.updateStatus(ctx, pvc, func(st *corev1.PersistentVolumeClaimStatus) { markControllerFailed(st, msg, infeasible) }); uerr != nil {
			return fmt.Errorf("%s; recording it: %w", msg, uerr)
		}
		return fmt.Errorf("%s", msg)
	}
	size := *resource.NewQuantity(resp.GetCapacityBytes(), resource.BinarySI)
	if have := pv.Spec.Capacity[corev1.ResourceStorage]; have.Cmp(size) != 0 {
		// A merge patch of spec.capacity alone (the verb the provisioner
		// already has on PVs), with the resourceVersion as precondition.
		patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"spec":{"capacity":{"storage":%q}}}`, pv.ResourceVersion, size.String())
		if _, err := r.opts.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("volume %s expanded to %s, updating its PersistentVolume's capacity: %w", pv.Name, size.String(), err)
		}
	}
	if resp.GetNodeExpansionRequired() {
		_, err := r.opts.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{
			VolumeId: pv.Spec.CSI.VolumeHandle,
			// The driver finds the volume's devices itself; the field is
			// required, not read.
			VolumePath:       pv.Spec.CSI.VolumeHandle,
			CapacityRange:    &csi.CapacityRange{RequiredBytes: resp.GetCapacityBytes()},
			VolumeCapability: volCap,
		})
		if err != nil {
			if _, uerr := r.updateStatus(ctx, pvc, markNodePending); uerr != nil {
				return uerr
			}
			r.events.Eventf(pvc, corev1.EventTypeNormal, ReasonFileSystemRequired, "Require file system resize of volume on node (in-process NodeExpandVolume: %v)", err)
			return nil
		}
	}
	if _, err := r.updateStatus(ctx, pvc, func(st *corev1.PersistentVolumeClaimStatus) { markFinished(st, size) }); err != nil {
		return err
	}
	r.events.Event(pvc, corev1.EventTypeNormal, ReasonResizeSuccessful, "Resize volume succeeded")
	return nil
}

// updateStatus writes pvc's status changed by mutate (UpdateStatus,
// conflicts retried by the queue) and gives the stored PVC.
func (r *Resizer) updateStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim, mutate func(*corev1.PersistentVolumeClaimStatus)) (*corev1.PersistentVolumeClaim, error) {
	n := pvc.DeepCopy()
	mutate(&n.Status)
	out, err := r.opts.Client.CoreV1().PersistentVolumeClaims(n.Namespace).UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return pvc, fmt.Errorf("PersistentVolumeClaim %s/%s: updating status: %w", pvc.Namespace, pvc.Name, err)
	}
	return out, nil
}

// capability is the volume capability of pv for the expand calls: block
// or mount (with the PV's fsType) and the access mode of its first access
// mode, mapped as the provisioner maps them.
func capability(pv *corev1.PersistentVolume) *csi.VolumeCapability {
	mode := csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
	if len(pv.Spec.AccessModes) > 0 {
		switch pv.Spec.AccessModes[0] {
		case corev1.ReadWriteOncePod:
			mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		case corev1.ReadOnlyMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
		case corev1.ReadWriteMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		}
	}
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: pv.Spec.CSI.FSType}}
	}
	return c
}
