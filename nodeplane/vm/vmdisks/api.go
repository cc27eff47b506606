package vmdisks

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// APIObjects reads the Secrets and ConfigMaps of VMI volumes from the API
// server (get only; Client should be uncached, so that the agent needs no
// list or watch on them): its methods are Options.Secrets and
// Options.ConfigMaps.
type APIObjects struct{ Client client.Reader }

// Secret gives a Secret's data; a missing Secret wraps ErrNotFound.
func (a APIObjects) Secret(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	s := &corev1.Secret{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return nil, notFound(err)
	}
	return s.Data, nil
}

// ConfigMap gives a ConfigMap's data and binaryData in one map; a
// missing ConfigMap wraps ErrNotFound.
func (a APIObjects) ConfigMap(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	cm := &corev1.ConfigMap{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		return nil, notFound(err)
	}
	out := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	return out, nil
}

func notFound(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w (%v)", ErrNotFound, err)
	}
	return err
}

// PVCResolver finds the disk of a PersistentVolumeClaim on this node: the
// PV it is bound to, as the hostpath CSI driver lays out its volumes
// (importcontroller.Resolve: <pool>/<volume>/data/disk.img for a
// Filesystem volume, the volume's block device file for a Block one),
// with the claim's status.capacity as the DiskSource's Capacity (the
// size the VM agent grows a running domain's disk to; no filesystem
// overhead is kept, as importcontroller fills disk.img to the full
// capacity). Its Resolve is domain.Options.ResolvePVC.
type PVCResolver struct {
	// Client reads PVCs, PVs and, for a PVC a DataVolume owns, the
	// DataVolume (get only); its scheme must know cdi.kubevirt.io/v1beta1.
	Client client.Reader
	// Volumes names this node, the CSI driver and its storage pools.
	Volumes importcontroller.Options
	// Timeout bounds the API reads of one Resolve.
	Timeout time.Duration
}

// Resolve gives the disk of claim in namespace. A claim that is missing,
// not bound yet, bound to a PV still binding, or owned by a DataVolume
// that has not Succeeded yet (CDI is still filling it) is an error
// wrapping domain.ErrVolumeNotReady, as is an API server out of reach; a
// PV of another driver or node, or whose volume is missing, is an error
// naming the claim and the PV.
func (r PVCResolver) Resolve(namespace, claim string) (domain.DiskSource, error) {
	ctx := context.Background()
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	id := "PersistentVolumeClaim " + namespace + "/" + claim
	notReady := func(format string, args ...any) (domain.DiskSource, error) {
		return domain.DiskSource{}, fmt.Errorf("%s: %s: %w", id, fmt.Sprintf(format, args...), domain.ErrVolumeNotReady)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: claim}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return notReady("not found")
		}
		return notReady("%v", err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return notReady("not bound yet (phase %s)", phaseOr(string(pvc.Status.Phase), "Pending"))
	}
	for _, o := range pvc.OwnerReferences {
		if o.Kind != "DataVolume" || o.Controller == nil || !*o.Controller {
			continue
		}
		dv := &cdiv1.DataVolume{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.Name}, dv)
		switch {
		case meta.IsNoMatchError(err):
			// no CDI API: nothing to wait for
		case apierrors.IsNotFound(err):
			return notReady("its DataVolume %s is gone", o.Name)
		case err != nil:
			return notReady("DataVolume %s: %v", o.Name, err)
		case dv.UID != o.UID:
			return notReady("its DataVolume %s was replaced", o.Name)
		case dv.Status.Phase != cdiv1.Succeeded:
			return notReady("DataVolume %s is %s (%s)", o.Name, phaseOr(string(dv.Status.Phase), "Pending"), phaseOr(string(dv.Status.Progress), "N/A"))
		}
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		if apierrors.IsNotFound(err) {
			return notReady("its PersistentVolume %s is not found", pvc.Spec.VolumeName)
		}
		return notReady("PersistentVolume %s: %v", pvc.Spec.VolumeName, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != namespace || ref.Name != claim || ref.UID != pvc.UID {
		return notReady("PersistentVolume %s is not bound to it yet", pv.Name)
	}
	vol, ok, err := importcontroller.Resolve(pv, r.Volumes)
	if err != nil {
		return domain.DiskSource{}, fmt.Errorf("%s: %w", id, err)
	}
	if !ok {
		return domain.DiskSource{}, fmt.Errorf("%s: PersistentVolume %s is not a volume of CSI driver %s on node %s: the VMI runs on the node of its volumes", id, pv.Name, r.Volumes.DriverName, r.Volumes.NodeName)
	}
	capacity := pvc.Status.Capacity[corev1.ResourceStorage]
	return domain.DiskSource{Path: vol.Path, Block: vol.Block, Format: domain.FormatRaw, Capacity: capacity.Value()}, nil
}

func phaseOr(phase, fallback string) string {
	if phase == "" {
		return fallback
	}
	return phase
}
