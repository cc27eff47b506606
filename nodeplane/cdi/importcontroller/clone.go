package importcontroller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/nodeplane/cdi/importer"
)

// cloneSource gives the disk of the volume a clone copies: the PVC its
// own PVC's AnnCloneRequest names (written by the DataVolume controller
// once it resolved spec.source.pvc or spec.sourceRef), Bound to a volume
// of this node's hostpath driver (Resolve). A source on another node, or
// not a hostpath CSI volume, is a permanent failure (CrossNodeClone in
// the message): CDI's host-assisted clone streams between two pods,
// converge copies on the one node that holds both volumes. A source in
// another namespace than dv's is copied only when dv's extended clone
// token (uploadtoken.AnnExtendedCloneToken, written by the DataVolume
// controller from the admission webhook's token) verifies against the
// published keys (Options.CloneKeys) and names this clone and dv's UID,
// as CDI's clone populator checks ValidateCloneTokenPVC before it
// copies; otherwise the clone fails, not retried.
func (r *Reconciler) cloneSource(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim) (string, error) {
	ref := pvc.Annotations[datavolume.AnnCloneRequest]
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return "", &importer.Error{URL: "clone", Reason: importer.ReasonInvalidInput,
			Err: fmt.Errorf("DataVolume %s/%s: PVC %s annotation %s %q: expected <namespace>/<source PVC>", dv.Namespace, dv.Name, pvc.Name, datavolume.AnnCloneRequest, ref)}
	}
	if ns != dv.Namespace {
		if err := r.checkCloneToken(ctx, dv, ns, name); err != nil {
			return "", err
		}
	}
	src := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, src); err != nil {
		return "", fmt.Errorf("DataVolume %s/%s: source PVC %s: %w", dv.Namespace, dv.Name, ref, err)
	}
	pv := &corev1.PersistentVolume{}
	if src.Spec.VolumeName == "" {
		return "", fmt.Errorf("DataVolume %s/%s: source PVC %s is not bound", dv.Namespace, dv.Name, ref)
	}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: src.Spec.VolumeName}, pv); err != nil {
		return "", fmt.Errorf("DataVolume %s/%s: source PV %s: %w", dv.Namespace, dv.Name, src.Spec.VolumeName, err)
	}
	vol, ours, err := Resolve(pv, r.Options)
	if !ours {
		return "", &importer.Error{URL: "clone of PVC " + ref, Reason: importer.ReasonInvalidInput,
			Err: fmt.Errorf("%s: the source volume (PV %s) is not a volume of this node %s: converge clones hostpath volumes on the node that holds both", datavolume.ReasonCrossNodeClone, pv.Name, r.Options.NodeName)}
	}
	if err != nil {
		return "", err
	}
	return vol.Path, nil
}

// checkCloneToken verifies dv's extended clone token for the clone of
// PVC ns/name: a missing, forged, expired or mismatched token is a
// permanent error naming ReasonCloneUnauthorized; unreadable keys a
// retried one.
func (r *Reconciler) checkCloneToken(ctx context.Context, dv *cdiv1.DataVolume, ns, name string) error {
	deny := func(err error) error {
		return &importer.Error{URL: "clone of PVC " + ns + "/" + name, Reason: importer.ReasonInvalidInput,
			Err: fmt.Errorf("%s: DataVolume %s/%s: %w", datavolume.ReasonCloneUnauthorized, dv.Namespace, dv.Name, err)}
	}
	if r.Options.CloneKeys.Name == "" {
		return deny(fmt.Errorf("the source is in namespace %s and this agent has no clone token keys (--upload-keys-namespace)", ns))
	}
	tok := dv.Annotations[uploadtoken.AnnExtendedCloneToken]
	if tok == "" {
		return deny(fmt.Errorf("the source is in namespace %s and the annotation %s is missing", ns, uploadtoken.AnnExtendedCloneToken))
	}
	keys, err := uploadtoken.PublicKeys(ctx, r.Reader, r.Options.CloneKeys)
	if err != nil {
		return err
	}
	c, err := uploadtoken.Verify(tok, keys, time.Now())
	if err != nil {
		return deny(fmt.Errorf("annotation %s: error verifying token: %w", uploadtoken.AnnExtendedCloneToken, err))
	}
	if err := uploadtoken.CheckClone(c, ns, name, dv.Namespace, dv.Name, string(dv.UID)); err != nil {
		return deny(fmt.Errorf("annotation %s: %w", uploadtoken.AnnExtendedCloneToken, err))
	}
	return nil
}
