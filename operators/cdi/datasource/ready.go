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
	ReasonReady                    = "Ready"
	ReasonNoSource                 = "NoSource"
	ReasonNotFound                 = "NotFound"
	ReasonSelfReference            = "SelfReference"
	ReasonCrossNamespaceReference  = "CrossNamespaceReference"
	ReasonMaxReferenceDepthReached = "MaxReferenceDepthReached"
	ReasonSnapshotNotSupported     = "SnapshotNotSupported"
)

// Verdict is what the Ready condition says: Status True or False, a
// Reason and a Message; Source is the source the DataSource resolves to
// (its own spec.source, or that of the DataSource it references), nil
// when the reference cannot be resolved.
type Verdict struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
	Source  *cdiv1.DataSourceSource
}

// Assess gives ds's Ready verdict, reading through r the DataSource its
// spec.source.dataSource names (CDI's ResolveDataSourceChain: same
// namespace, not itself, one level) and the DataVolume and PVC the
// resolved source PVC names (the table of the package doc). A read error
// other than not found is returned.
func Assess(ctx context.Context, r client.Reader, ds *cdiv1.DataSource) (Verdict, error) {
	resolved := ds
	if ref := ds.Spec.Source.DataSource; ref != nil {
		ns := ref.Namespace
		if ns == "" {
			ns = ds.Namespace
		}
		switch {
		case ns != ds.Namespace:
			return Verdict{Status: corev1.ConditionFalse, Reason: ReasonCrossNamespaceReference, Message: "DataSource cannot reference a DataSource in another namespace"}, nil
		case ref.Name == ds.Name:
			return Verdict{Status: corev1.ConditionFalse, Reason: ReasonSelfReference, Message: "DataSource cannot self-reference"}, nil
		}
		resolved = &cdiv1.DataSource{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, resolved); err != nil {
			if apierrors.IsNotFound(err) {
				return Verdict{Status: corev1.ConditionFalse, Reason: ReasonNotFound, Message: err.Error()}, nil
			}
			return Verdict{}, fmt.Errorf("reading DataSource %s/%s: %w", ns, ref.Name, err)
		}
		if resolved.Spec.Source.DataSource != nil {
			return Verdict{Status: corev1.ConditionFalse, Reason: ReasonMaxReferenceDepthReached, Message: "DataSource reference chain exceeds maximum depth of 1"}, nil
		}
	}
	src := resolved.Spec.Source
	var v Verdict
	var err error
	switch {
	case src.PVC != nil:
		ns := src.PVC.Namespace
		if ns == "" {
			ns = ds.Namespace
		}
		v, err = assessPVC(ctx, r, types.NamespacedName{Namespace: ns, Name: src.PVC.Name})
	case src.Snapshot != nil:
		v = Verdict{Status: corev1.ConditionFalse, Reason: ReasonSnapshotNotSupported, Message: "spec.source.snapshot: converge's hostpath CSI driver has no volume snapshots; expected spec.source.pvc"}
	default:
		v = Verdict{Status: corev1.ConditionFalse, Reason: ReasonNoSource, Message: "No source PVC set"}
	}
	v.Source = src.DeepCopy()
	return v, err
}

// assessPVC judges the source PVC key as CDI's handlePvcSource: its
// DataVolume's phase when there is one, else whether the PVC exists.
func assessPVC(ctx context.Context, r client.Reader, key types.NamespacedName) (Verdict, error) {
	ready := Verdict{Status: corev1.ConditionTrue, Reason: ReasonReady, Message: "DataSource is ready to be consumed"}
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
		return Verdict{Status: corev1.ConditionFalse, Reason: phase, Message: fmt.Sprintf("Import DataVolume phase %s", phase)}, nil
	case !apierrors.IsNotFound(err):
		return Verdict{}, fmt.Errorf("reading DataVolume %s: %w", key, err)
	}
	if err := r.Get(ctx, key, &corev1.PersistentVolumeClaim{}); err != nil {
		if apierrors.IsNotFound(err) {
			return Verdict{Status: corev1.ConditionFalse, Reason: ReasonNotFound, Message: "PVC not found"}, nil
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
