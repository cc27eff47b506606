package dataimportcron

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/crdwait"
)

// CRDName is the DataImportCron CRD (components/cdi/dataimportcron_crd.cue).
const CRDName = "dataimportcrons.cdi.kubevirt.io"

// DataSourceCRDName is the DataSource CRD, which the controller watches.
const DataSourceCRDName = "datasources.cdi.kubevirt.io"

// EventSource is the component of the controller's events (CDI's
// dataImportControllerName).
const EventSource = "dataimportcron-controller"

// Setup registers the "dataimportcron" controller with mgr once the
// DataImportCron, DataSource and DataVolume CRDs are established (polled every opts.CRDPoll,
// internal/crdwait) and opts.Gate, when set, opened. mgr's scheme must
// know cdi.kubevirt.io/v1beta1 and core/v1. It watches DataImportCrons,
// and the DataVolumes and DataSources (updates, deletions) and PVCs
// (deletions) labelled cdi.kubevirt.io/dataImportCron, as CDI's
// addDataImportCronControllerWatches. RBAC: get, list, watch, update
// dataimportcrons and update dataimportcrons/status; get, list, watch,
// create, update, delete, deletecollection datavolumes, datasources and
// persistentvolumeclaims; get secrets and configmaps (the registry
// source's secretRef and certConfigMap, read uncached); create, patch
// events.
func Setup(mgr ctrl.Manager, opts Options) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !crdwait.Wait(ctx, mgr.GetAPIReader(), opts.CRDPoll, CRDName, DataSourceCRDName, dvapi.CRDName) {
			return nil
		}
		if opts.Gate != nil {
			ctrl.Log.WithName("dataimportcron").Info("DataImportCron CRD established; waiting for a native CDI")
			if err := opts.Gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("dataimportcron: %w", err)
			}
		}
		ctrl.Log.WithName("dataimportcron").Info("starting the DataImportCron controller")
		if err := register(mgr, opts); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}))
}

func register(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{
		Client:  mgr.GetClient(),
		Events:  mgr.GetEventRecorderFor(EventSource), //nolint:staticcheck // core/v1 Events, which kubectl describe shows, as CDI
		Digest:  Digester{Reader: mgr.GetAPIReader(), Options: opts}.Digest,
		Options: opts,
	}
	toCron := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		if name := obj.GetLabels()[LabelCron]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
		}
		return nil
	})
	labelled := func(o client.Object) bool { return o.GetLabels()[LabelCron] != "" }
	updatesAndDeletes := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return labelled(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return labelled(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	deletes := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(e event.DeleteEvent) bool { return labelled(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("dataimportcron").
		For(&cdiv1.DataImportCron{}).
		Watches(&cdiv1.DataVolume{}, toCron, builder.WithPredicates(updatesAndDeletes)).
		Watches(&cdiv1.DataSource{}, toCron, builder.WithPredicates(updatesAndDeletes)).
		Watches(&corev1.PersistentVolumeClaim{}, toCron, builder.WithPredicates(deletes)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.Concurrency, 1), SkipNameValidation: &opts.SkipNameValidation}).
		Complete(r); err != nil {
		return fmt.Errorf("dataimportcron: building the controller: %w", err)
	}
	return nil
}
