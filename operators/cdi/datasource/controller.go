package datasource

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// CRDName is the DataSource CRD, which must be established before the
// controller starts.
const CRDName = "datasources.cdi.kubevirt.io"

// Options are the controller's settings.
type Options struct {
	// CRDPoll is how often Setup checks whether the DataSource and
	// DataVolume CRDs are established yet.
	CRDPoll time.Duration
	// Gate, when set, holds the controller back once the CRDs are
	// established until it returns nil: the CDI operator's gate of its
	// cdi-controller role (operand.Gates.Wait). An error other than the
	// context's ends the manager.
	Gate func(ctx context.Context) error
	// SkipNameValidation lets several managers in one process register
	// the controller; for tests.
	SkipNameValidation bool
}

// DefaultOptions polls for the CRDs every 5 s.
func DefaultOptions() Options { return Options{CRDPoll: 5 * time.Second} }

// Reconciler writes one DataSource's Ready condition and status.source:
// the resolved source while Ready, empty otherwise.
type Reconciler struct {
	// Client reads the DataSources, DataVolumes and PVCs (the cache) and
	// writes the DataSources' status.
	Client client.Client
}

// Reconcile assesses the DataSource (Assess) and writes its status when
// it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ds := &cdiv1.DataSource{}
	if err := r.Client.Get(ctx, req.NamespacedName, ds); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	v, err := Assess(ctx, r.Client, ds)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("DataSource %s: %w", req.NamespacedName, err)
	}
	changed := setReady(ds, v, metav1.Now())
	// status.source is the resolved source while Ready, empty otherwise
	// (CDI's update).
	source := cdiv1.DataSourceSource{}
	if v.Status == corev1.ConditionTrue && v.Source != nil {
		source = *v.Source
	}
	if !reflect.DeepEqual(ds.Status.Source, source) {
		ds.Status.Source = source
		changed = true
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	if err := r.Client.Status().Update(ctx, ds); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("DataSource %s: writing its status: %w", req.NamespacedName, err)
	}
	return reconcile.Result{}, nil
}

// Setup registers the "datasource" controller with mgr once the
// DataSource and DataVolume CRDs are established (polled every
// o.CRDPoll, internal/crdwait) and o.Gate, when set, opened. mgr's scheme
// must know cdi.kubevirt.io/v1beta1 and core/v1. RBAC: get, list, watch
// datasources, datavolumes and persistentvolumeclaims; update
// datasources/status.
func Setup(mgr ctrl.Manager, o Options) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !crdwait.Wait(ctx, mgr.GetAPIReader(), o.CRDPoll, CRDName, dvapi.CRDName) {
			return nil
		}
		if o.Gate != nil {
			if err := o.Gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("datasource: %w", err)
			}
		}
		ctrl.Log.WithName("datasource").Info("starting the DataSource controller")
		if err := register(mgr, o); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}))
}

func register(mgr ctrl.Manager, o Options) error {
	c := mgr.GetClient()
	// naming maps a DataVolume, PVC or DataSource to the DataSources
	// whose source names it (directly, or for a DataSource through
	// spec.source.dataSource).
	naming := func(kind string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
			list := &cdiv1.DataSourceList{}
			if err := c.List(ctx, list); err != nil {
				ctrl.Log.WithName("datasource").Error(err, "listing the DataSources", "for", kind)
				return nil
			}
			var out []reconcile.Request
			for _, ds := range list.Items {
				if names(&ds, kind, obj.GetNamespace(), obj.GetName()) {
					out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ds)})
				}
			}
			return out
		})
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("datasource").
		For(&cdiv1.DataSource{}).
		Watches(&cdiv1.DataSource{}, naming("DataSource")).
		Watches(&cdiv1.DataVolume{}, naming("PVC")).
		Watches(&corev1.PersistentVolumeClaim{}, naming("PVC")).
		WithOptions(controller.Options{SkipNameValidation: &o.SkipNameValidation}).
		Complete(&Reconciler{Client: c})
	if err != nil {
		return fmt.Errorf("datasource: building the controller: %w", err)
	}
	return nil
}

// names reports whether ds's source names the object ns/name: kind
// "PVC" its spec.source.pvc (a DataVolume of the same name counts: it
// fills that PVC), kind "DataSource" its spec.source.dataSource.
// Namespaces default to ds's.
func names(ds *cdiv1.DataSource, kind, ns, name string) bool {
	or := func(s string) string {
		if s == "" {
			return ds.Namespace
		}
		return s
	}
	s := ds.Spec.Source
	switch kind {
	case "PVC":
		return s.PVC != nil && s.PVC.Name == name && or(s.PVC.Namespace) == ns
	case "DataSource":
		return s.DataSource != nil && s.DataSource.Name == name && or(s.DataSource.Namespace) == ns
	}
	return false
}
