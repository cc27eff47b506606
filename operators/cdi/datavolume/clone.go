package datavolume

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/v1alpha1"
)

// clone is what the controller knows of a clone's source: either the
// source PVC and the node its volume is on, or why it waits (reason and
// message for the Running condition) or why it fails (failReason).
type clone struct {
	source     *corev1.PersistentVolumeClaim
	node       string
	waitReason string
	failReason string
	message    string
}

// resolveClone follows dv's spec.sourceRef (a DataSource in
// spec.sourceRef.namespace, else dv's namespace, read from the API server:
// its spec.source.pvc, or the DataSource its spec.source.dataSource names,
// one level as CDI allows) or spec.source.pvc to the source PVC (a
// namespace left empty is dv's, as CDI's newCloneSourceHandler), as CDI's
// pkg/controller/datavolume (getSourceRefOp, clone-controller-base.go):
// missing objects wait (CloneWithoutSource), a PVC not Bound or whose
// DataVolume has not Succeeded waits (CloneSourceNotReady), a snapshot
// source fails (converge's hostpath volumes have no snapshots), and so
// does a source whose PV is not node-local (CrossNodeClone: a
// host-assisted clone copies on the source's node). A source in another
// namespace must be authorized by dv's clone token (authorize).
func (r *Reconciler) resolveClone(ctx context.Context, dv *cdiv1.DataVolume) (clone, error) {
	ns, name := dv.Namespace, ""
	if ref := dv.Spec.SourceRef; ref != nil {
		dsNS := dv.Namespace
		if ref.Namespace != nil && *ref.Namespace != "" {
			dsNS = *ref.Namespace
		}
		src, c, err := r.dataSource(ctx, dsNS, ref.Name, 0)
		if err != nil || src == nil {
			return c, err
		}
		if src.Namespace != "" {
			ns = src.Namespace
		}
		name = src.Name
	} else {
		name = dv.Spec.Source.PVC.Name
		if n := dv.Spec.Source.PVC.Namespace; n != "" {
			ns = n
		}
	}
	if ns != dv.Namespace {
		if c, err := r.authorize(ctx, dv, ns, name); err != nil || c.failReason != "" {
			return c, err
		}
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return clone{waitReason: dvapi.ReasonCloneWithoutSource, message: fmt.Sprintf("The source pvc %s/%s doesn't exist", ns, name)}, nil
		}
		return clone{}, fmt.Errorf("reading the source PVC %s/%s: %w", ns, name, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return clone{waitReason: dvapi.ReasonCloneSourceNotReady, message: fmt.Sprintf("the source PVC %s/%s is not Bound", ns, name)}, nil
	}
	for _, o := range pvc.OwnerReferences {
		if o.Kind != "DataVolume" || o.Controller == nil || !*o.Controller {
			continue
		}
		src := &cdiv1.DataVolume{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: o.Name}, src); err != nil {
			return clone{}, fmt.Errorf("reading the source DataVolume %s/%s: %w", ns, o.Name, err)
		}
		if src.Status.Phase != cdiv1.Succeeded {
			return clone{waitReason: dvapi.ReasonCloneSourceNotReady, message: fmt.Sprintf("the source DataVolume %s/%s is %s, not Succeeded", ns, o.Name, phaseOr(src.Status.Phase))}, nil
		}
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return clone{}, fmt.Errorf("reading the source PV %s: %w", pvc.Spec.VolumeName, err)
	}
	node := NodeOf(pv)
	if node == "" {
		return clone{failReason: dvapi.ReasonCrossNodeClone, message: fmt.Sprintf(
			"the source PVC %s/%s is bound to PV %s, which is not on one node: converge clones hostpath CSI volumes by copying them on their node (CDI's host-assisted clone) and has no CSI clone or snapshot", ns, name, pv.Name)}, nil
	}
	return clone{source: pvc, node: node}, nil
}

// dataSource gives the spec.source.pvc of DataSource ns/name, following
// one spec.source.dataSource reference (depth counts them); a PVC without
// a namespace is in the DataVolume's.
func (r *Reconciler) dataSource(ctx context.Context, ns, name string, depth int) (*cdiv1.DataVolumeSourcePVC, clone, error) {
	ds := &cdiv1.DataSource{}
	if err := r.reader().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ds); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, clone{waitReason: dvapi.ReasonCloneWithoutSource, message: fmt.Sprintf("The source DataSource %s/%s doesn't exist", ns, name)}, nil
		}
		return nil, clone{}, fmt.Errorf("reading DataSource %s/%s: %w", ns, name, err)
	}
	s := ds.Spec.Source
	switch {
	case s.Snapshot != nil:
		return nil, clone{failReason: dvapi.ReasonUnsupportedSource, message: fmt.Sprintf(
			"DataSource %s/%s: spec.source.snapshot: not supported by converge (the hostpath CSI driver has no volume snapshots); expected spec.source.pvc", ns, name)}, nil
	case s.PVC != nil:
		return s.PVC, clone{}, nil
	case s.DataSource != nil && depth == 0:
		rns := s.DataSource.Namespace
		if rns == "" {
			rns = ns
		}
		return r.dataSource(ctx, rns, s.DataSource.Name, depth+1)
	case s.DataSource != nil:
		return nil, clone{failReason: dvapi.ReasonUnsupportedSource, message: fmt.Sprintf(
			"DataSource %s/%s: spec.source.dataSource: a DataSource referring to a DataSource that refers to another; the maximum depth of a reference chain is 1", ns, name)}, nil
	}
	return nil, clone{waitReason: dvapi.ReasonCloneWithoutSource, message: fmt.Sprintf("The source DataSource %s/%s names no source yet", ns, name)}, nil
}

// NodeOf gives the node a PV is on: the one value of its required node
// affinity on v1alpha1.HostpathTopologyKey or kubernetes.io/hostname, "" when it
// has none or several.
func NodeOf(pv *corev1.PersistentVolume) string {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) != 1 {
		return ""
	}
	for _, e := range na.Required.NodeSelectorTerms[0].MatchExpressions {
		if (e.Key == v1alpha1.HostpathTopologyKey || e.Key == corev1.LabelHostname) && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
			return e.Values[0]
		}
	}
	return ""
}

func phaseOr(p cdiv1.DataVolumePhase) string {
	if p == "" {
		return "without a phase"
	}
	return string(p)
}
