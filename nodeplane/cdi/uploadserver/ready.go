package uploadserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
)

// ReadyMarker reconciles DataVolumes with spec.source.upload: when the
// DataVolume's PVC is Bound (and controlled by it) to a PV of this node,
// it sets phase UploadReady (from "", Pending, UploadScheduled or
// WaitForFirstConsumer), CDI's signal that the upload server is ready.
type ReadyMarker struct {
	// Client reads (cached) and writes DataVolume status.
	Client client.Client
	// Reader gives fresh reads for the status retry loop.
	Reader client.Reader
	// Options.Volumes says which PVs are this node's.
	Options Options
}

// waiting are the phases ReadyMarker moves to UploadReady.
var waiting = []cdiv1.DataVolumePhase{"", cdiv1.Pending, cdiv1.UploadScheduled, cdiv1.WaitForFirstConsumer}

// Reconcile handles one DataVolume; errors name it.
func (m *ReadyMarker) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dv := &cdiv1.DataVolume{}
	if err := m.Client.Get(ctx, req.NamespacedName, dv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if dv.DeletionTimestamp != nil || dv.Spec.Source == nil || dv.Spec.Source.Upload == nil || !isWaiting(dv.Status.Phase) {
		return ctrl.Result{}, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := m.Client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || !metav1.IsControlledBy(pvc, dv) {
		return ctrl.Result{}, nil
	}
	pv := &corev1.PersistentVolume{}
	if err := m.Client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, ours, err := importcontroller.Resolve(pv, m.Options.Volumes); !ours {
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("DataVolume %s: %w", req, err)
	}
	return ctrl.Result{}, updateStatus(ctx, m.Client, m.Reader, req.NamespacedName, func(dv *cdiv1.DataVolume) bool {
		if !isWaiting(dv.Status.Phase) {
			return false
		}
		dv.Status.Phase = cdiv1.UploadReady
		dv.Status.ClaimName = pvc.Name
		c := datavolume.SetCondition(dv.Status.Conditions, cdiv1.DataVolumeBound, corev1.ConditionTrue, datavolume.ReasonBound, "PVC "+pvc.Name+" Bound")
		c = datavolume.SetCondition(c, cdiv1.DataVolumeRunning, corev1.ConditionTrue, "UploadReady", "Upload server ready on node "+m.Options.Volumes.NodeName)
		dv.Status.Conditions = datavolume.SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionFalse, "UploadReady", "")
		return true
	})
}

func isWaiting(p cdiv1.DataVolumePhase) bool {
	for _, w := range waiting {
		if p == w {
			return true
		}
	}
	return false
}
