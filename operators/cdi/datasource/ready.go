package datasource

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reasons of the Ready condition, CDI's (datasource-controller.go and
// pkg/controller/common NotFound) and converge's SnapshotNotSupported.
const (
	ReasonReady                = "Ready"
	ReasonNoSource             = "NoSource"
	ReasonNotFound             = "NotFound"
	ReasonSelfReference        = "SelfReference"
	ReasonMaxDepthReached      = "MaxDepthReached"
	ReasonSnapshotNotSupported = "SnapshotNotSupported"
)

// Verdict is what the Ready condition says: Status True or False, a
// Reason and a Message.
type Verdict struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// Assess gives ds's Ready verdict, reading through r the DataSource its
// spec.source.dataSource names and the DataVolume and PVC the source PVC
// names (the table of the package doc). A read error other than not
// found is returned.
func Assess(ctx context.Context, r client.Reader, ds *cdiv1.DataSource) (Verdict, error) {
	src := ds.Spec.Source
	if ref := src.DataSource; ref != nil {
		ns := ref.Namespace
		if ns == "" {
			ns = ds.Namespace
		}
		if ns == ds.Namespace && ref.Name == ds.Name {
			return Verdict{corev1.ConditionFalse, ReasonSelfReference, fmt.Sprintf("DataSource %s/%s references itself", ns, ref.Name)}, nil
		}
		target := &cdiv1.DataSource{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, target); err != nil {
			if apierrors.IsNotFound(err) {
				return Verdict{corev1.ConditionFalse, ReasonNotFound, fmt.Sprintf("referenced DataSource %s/%s not found", ns, ref.Name)}, nil
			}
			return Verdict{}, fmt.Errorf("reading DataSource %s/%s: %w", ns, ref.Name, err)
		}
		if target.Spec.Source.DataSource != nil {
			return Verdict{corev1.ConditionFalse, ReasonMaxDepthReached, fmt.Sprintf("DataSource %s/%s references DataSource %s/%s, which references another: at most one level is followed", ds.Namespace, ds.Name, ns, ref.Name)}, nil
		}
		src = target.Spec.Source
		// The referenced DataSource's own PVC namespace defaults to
		// its namespace.
		if src.PVC != nil && src.PVC.Namespace == "" {
			pvc := *src.PVC
			pvc.Namespace = ns
			src.PVC = &pvc
		}
	}
	switch {
	case src.PVC != nil:
		ns := src.PVC.Namespace
		if ns == "" {
			ns = ds.Namespace
		}
		return assessPVC(ctx, r, types.NamespacedName{Namespace: ns, Name: src.PVC.Name})
	case src.Snapshot != nil:
		return Verdict{corev1.ConditionFalse, ReasonSnapshotNotSupported, "spec.source.snapshot: converge's hostpath CSI driver has no volume snapshots; expected spec.source.pvc"}, nil
	default:
		return Verdict{corev1.ConditionFalse, ReasonNoSource, "No source PVC set"}, nil
	}
}

// assessPVC judges the source PVC key as CDI's handlePvcSource: its
// DataVolume's phase when there is one, else whether the PVC exists.
func assessPVC(ctx context.Context, r client.Reader, key types.NamespacedName) (Verdict, error) {
	ready := Verdict{corev1.ConditionTrue, ReasonReady, "DataSource is ready to be consumed"}
	dv := &cdiv1.DataVolume{}
	err := r.Get(ctx, key, dv)
	switch {
	case err == nil && dv.Status.Phase == cdiv1.Succeeded:
		return ready, nil
	case err == nil:
		phase := string(dv.Status.Phase)
		if phase == "" {
			// Not yet reconciled by the DataVolume controller.
			phase = string(cdiv1.Pending)
		}
		return Verdict{corev1.ConditionFalse, phase, fmt.Sprintf("Import DataVolume phase %s", phase)}, nil
	case !apierrors.IsNotFound(err):
		return Verdict{}, fmt.Errorf("reading DataVolume %s: %w", key, err)
	}
	if err := r.Get(ctx, key, &corev1.PersistentVolumeClaim{}); err != nil {
		if apierrors.IsNotFound(err) {
			return Verdict{corev1.ConditionFalse, ReasonNotFound, "PVC not found"}, nil
		}
		return Verdict{}, fmt.Errorf("reading PVC %s: %w", key, err)
	}
	return ready, nil
}

// setReady sets ds's Ready condition to v and reports whether anything
// changed: a new status moves lastTransitionTime, any change moves
// lastHeartbeatTime.
func setReady(ds *cdiv1.DataSource, v Verdict, now metav1.Time) bool {
	var c *cdiv1.DataSourceCondition
	for i := range ds.Status.Conditions {
		if ds.Status.Conditions[i].Type == cdiv1.DataSourceReady {
			c = &ds.Status.Conditions[i]
		}
	}
	if c == nil {
		ds.Status.Conditions = append(ds.Status.Conditions, cdiv1.DataSourceCondition{Type: cdiv1.DataSourceReady})
		c = &ds.Status.Conditions[len(ds.Status.Conditions)-1]
	}
	if c.Status == v.Status && c.Reason == v.Reason && c.Message == v.Message {
		return false
	}
	if c.Status != v.Status {
		c.LastTransitionTime = now
	}
	c.LastHeartbeatTime = now
	c.Status, c.Reason, c.Message = v.Status, v.Reason, v.Message
	return true
}
