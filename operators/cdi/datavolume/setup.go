package datavolume

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/crdwait"
)

// Setup registers the "datavolume" controller with mgr once the
// DataVolume CRD (api/datavolume's CRDName) is established (converge
// installs it in the graph's "crds" stage, so it may appear after
// converge-controller starts; until then it polls every opts.CRDPoll,
// internal/crdwait) and opts.Gate, when set, opened. mgr's scheme must know cdi.kubevirt.io/v1beta1
// (cdiv1.AddToScheme of
// kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1) and
// the client-go types. As virtcontroller.Setup.
func Setup(mgr ctrl.Manager, opts Options) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !crdwait.Wait(ctx, mgr.GetAPIReader(), opts.CRDPoll, dvapi.CRDName) {
			return nil
		}
		if opts.Gate != nil {
			ctrl.Log.WithName("datavolume").Info("DataVolume CRD established; waiting for a native CDI")
			if err := opts.Gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("datavolume: %w", err)
			}
		}
		ctrl.Log.WithName("datavolume").Info("starting the DataVolume controller")
		if err := register(mgr, opts); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}))
}

func register(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{Client: mgr.GetClient(), CDI: opts.CDI, Reader: mgr.GetAPIReader(), Tokens: opts.Tokens}
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
