package provisioner

import (
	"context"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// Data source kinds csi-provisioner knows (external-provisioner
// pkg/controller/controller.go pvcKind, snapshotKind/snapshotAPIGroup).
const (
	kindPVC          = "PersistentVolumeClaim"
	kindSnapshot     = "VolumeSnapshot"
	snapshotAPIGroup = "snapshot.storage.k8s.io"
)

// dataSourceRef is a claim's data source, normalized as csi-provisioner's
// dataSource does: spec.dataSource first, else spec.dataSourceRef, in the
// claim's namespace unless dataSourceRef names another.
type dataSourceRef struct {
	kind, apiGroup, namespace, name string
}

// claimDataSource gives the claim's data source, nil for none. A
// dataSourceRef into another namespace is InvalidArgument: this
// provisioner does not read ReferenceGrants (CrossNamespaceVolumeDataSource).
func claimDataSource(claim *corev1.PersistentVolumeClaim) (*dataSourceRef, error) {
	switch ds, ref := claim.Spec.DataSource, claim.Spec.DataSourceRef; {
	case ds != nil:
		return &dataSourceRef{kind: ds.Kind, apiGroup: deref(ds.APIGroup), namespace: claim.Namespace, name: ds.Name}, nil
	case ref != nil:
		ns := claim.Namespace
		if ref.Namespace != nil && *ref.Namespace != "" {
			ns = *ref.Namespace
		}
		if ns != claim.Namespace {
			return nil, status.Errorf(codes.InvalidArgument, "PersistentVolumeClaim %s/%s: dataSourceRef in namespace %s: cross-namespace data sources are not supported", claim.Namespace, claim.Name, ns)
		}
		return &dataSourceRef{kind: ref.Kind, apiGroup: deref(ref.APIGroup), namespace: ns, name: ref.Name}, nil
	}
	return nil, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// contentSource gives the CreateVolume content source of a claim: nil
// without a data source, the source volume for a PersistentVolumeClaim
// (a clone, see cloneSource), the snapshot for a VolumeSnapshot (a
// restore, see snapshotSource); any other kind is an IgnoredError, left to
// its volume populator as csi-provisioner does.
func (p *Provisioner) contentSource(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*csi.VolumeContentSource, controller.ProvisioningState, error) {
	ds, err := claimDataSource(claim)
	if err != nil || ds == nil {
		return nil, controller.ProvisioningFinished, err
	}
	switch {
	case ds.name == "":
		return nil, controller.ProvisioningFinished, status.Errorf(codes.InvalidArgument, "PersistentVolumeClaim %s/%s: data source %s without a name", claim.Namespace, claim.Name, ds.kind)
	case ds.kind == kindPVC && ds.apiGroup == "":
		return p.cloneSource(ctx, claim, ds.name)
	case ds.kind == kindSnapshot && ds.apiGroup == snapshotAPIGroup:
		return p.snapshotSource(ctx, claim, ds.name)
	}
	return nil, controller.ProvisioningFinished, &controller.IgnoredError{Reason: fmt.Sprintf("data source (%s) is not handled by the provisioner, assuming an external populator will provision it", ds.kind)}
}

// cloneSource checks the clone source PVC named source in the claim's
// namespace as csi-provisioner's getPVCSource does and gives its volume as
// the content source. A missing, unbound or deleting source is
// FailedPrecondition with ProvisioningNoChange (retried: it may become
// ready). Final, InvalidArgument: a smaller request than the source's, a
// source of another driver or volume mode, and a source volume on another
// node (the volumes are node-local; the claim's selected node must be the
// source's node).
func (p *Provisioner) cloneSource(ctx context.Context, claim *corev1.PersistentVolumeClaim, source string) (*csi.VolumeContentSource, controller.ProvisioningState, error) {
	what := fmt.Sprintf("PersistentVolumeClaim %s/%s: clone source PersistentVolumeClaim %s", claim.Namespace, claim.Name, source)
	retry := func(format string, a ...any) (*csi.VolumeContentSource, controller.ProvisioningState, error) {
		return nil, controller.ProvisioningNoChange, status.Errorf(codes.FailedPrecondition, what+": "+format, a...)
	}
	final := func(format string, a ...any) (*csi.VolumeContentSource, controller.ProvisioningState, error) {
		return nil, controller.ProvisioningFinished, status.Errorf(codes.InvalidArgument, what+": "+format, a...)
	}
	src, err := p.opts.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, source, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return retry("not found")
	} else if err != nil {
		return retry("%v", err)
	}
	if src.Status.Phase != corev1.ClaimBound {
		return retry("must be Bound, it is %q", src.Status.Phase)
	}
	if src.DeletionTimestamp != nil {
		return retry("is being deleted")
	}
	want, have := claim.Spec.Resources.Requests[corev1.ResourceStorage], src.Spec.Resources.Requests[corev1.ResourceStorage]
	if want.Cmp(have) < 0 {
		return final("new PVC request must be greater than or equal in size to the specified PVC data source, requested %s but source is %s", want.String(), have.String())
	}
	pv, err := p.opts.Client.CoreV1().PersistentVolumes().Get(ctx, src.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return retry("volume %q: %v", src.Spec.VolumeName, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.driver {
		return final("volume %s is not a volume of %s", pv.Name, p.driver)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != src.UID || ref.Namespace != src.Namespace || ref.Name != src.Name {
		return retry("volume %s is not bound to it", pv.Name)
	}
	srcMode := corev1.PersistentVolumeFilesystem
	if pv.Spec.VolumeMode != nil {
		srcMode = *pv.Spec.VolumeMode
	}
	if wantMode := volumeMode(claim); srcMode != wantMode {
		return final("the source PVC and destination PVCs must have the same volume mode for cloning.  Source is %s, but new PVC requested %s", srcMode, wantMode)
	}
	if !affinityMatches(pv, p.segments) {
		return final("volume %s is on node %s, not on node %s: %s volumes are local to their node, so a clone is provisioned only on its source's node (schedule the clone's first consumer there)", pv.Name, affinityNodes(pv), p.nodeID, p.driver)
	}
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: pv.Spec.CSI.VolumeHandle}}}, controller.ProvisioningFinished, nil
}

// volumeMode is the claim's volume mode, Filesystem when unset.
func volumeMode(claim *corev1.PersistentVolumeClaim) corev1.PersistentVolumeMode {
	if isBlock(claim) {
		return corev1.PersistentVolumeBlock
	}
	return corev1.PersistentVolumeFilesystem
}

// affinityNodes names the nodes a PV's required node affinity admits, for
// messages: the values of its expressions, "none" without affinity.
func affinityNodes(pv *corev1.PersistentVolume) string {
	var vals []string
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		for _, t := range na.Required.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				vals = append(vals, e.Values...)
			}
		}
	}
	if len(vals) == 0 {
		return "none"
	}
	return strings.Join(vals, ",")
}
