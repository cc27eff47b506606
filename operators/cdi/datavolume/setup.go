package datavolume

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// CRDName is the CRD the controller watches; Setup waits for it.
const CRDName = "datavolumes.cdi.kubevirt.io"

// Setup registers the "datavolume" controller with mgr once the
// DataVolume CRD is established (converge installs it in the graph's
// "crds" stage, so it may appear after converge-controller starts); until
// then it polls every opts.CRDPoll. mgr's scheme must know
// cdi.kubevirt.io/v1beta1 (cdiv1.AddToScheme of
// kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1) and
// the client-go types. As virtctl.Setup.
func Setup(mgr ctrl.Manager, opts Options) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for !CRDEstablished(ctx, mgr.GetAPIReader(), CRDName) {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(opts.CRDPoll):
			}
		}
		ctrl.Log.WithName("datavolume").Info("DataVolume CRD established; starting the DataVolume controller")
		if err := register(mgr, opts); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}))
}

// CRDEstablished reports whether the CRD name exists with condition
// Established=True (false on any read error).
func CRDEstablished(ctx context.Context, r client.Reader, name string) bool {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := r.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func register(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{Client: mgr.GetClient()}
	// A new or newly Ready importer node may unblock DataVolumes waiting
	// for one.
	waiting := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &cdiv1.DataVolumeList{}
		if err := mgr.GetClient().List(ctx, list); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if list.Items[i].Status.Phase == cdiv1.WaitForFirstConsumer {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("datavolume").
		For(&cdiv1.DataVolume{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Watches(&corev1.Node{}, waiting).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.Concurrency, 1), SkipNameValidation: &opts.SkipNameValidation}).
		Complete(r); err != nil {
		return fmt.Errorf("datavolume: building the controller: %w", err)
	}
	return nil
}
