package dataimportcron

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// manages reports whether the cron may manage its DataSource: it does
// unless the DataSource is labelled for another cron that exists and
// names it too, which is a Warning event ErrDataSourceAlreadyManaged (CDI's
// shouldReconcileCron).
func (r *Reconciler) manages(ctx context.Context, cron *cdiv1.DataImportCron) (bool, error) {
	ds := &cdiv1.DataSource{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cron.Namespace, Name: cron.Spec.ManagedDataSource}, ds); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	owner := ds.Labels[LabelCron]
	if owner == "" || owner == cron.Name {
		return true, nil
	}
	other := &cdiv1.DataImportCron{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cron.Namespace, Name: owner}, other); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	if other.Spec.ManagedDataSource != ds.Name {
		return true, nil
	}
	r.event(cron, corev1.EventTypeWarning, "ErrDataSourceAlreadyManaged", fmt.Sprintf("DataSource %s is already managed by DataImportCron %s", ds.Name, other.Name))
	return false, nil
}

// updateDataSource creates the cron's DataSource when missing (labelled
// for the cron) and, when it is labelled for this cron, sets its labels
// and its spec.source.pvc to status.lastImportedPVC (CDI's
// updateDataSource and populateDataSource, format pvc). A DataSource
// labelled for no cron or another one is left as it is.
func (r *Reconciler) updateDataSource(ctx context.Context, cron *cdiv1.DataImportCron) error {
	ds := &cdiv1.DataSource{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cron.Namespace, Name: cron.Spec.ManagedDataSource}, ds); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		ds = &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Name: cron.Spec.ManagedDataSource, Namespace: cron.Namespace}}
		cronLabels(cron, ds)
		if err := r.Client.Create(ctx, ds); err != nil {
			return err
		}
		r.log(cron).Info("DataSource created", "dataSource", ds.Name)
	} else if ds.Labels[LabelCron] != cron.Name {
		return nil
	}
	before := ds.DeepCopy()
	cronLabels(cron, ds)
	passLabels(cron, ds)
	if pvc := cron.Status.LastImportedPVC; pvc != nil {
		ds.Spec.Source = cdiv1.DataSourceSource{PVC: pvc.DeepCopy()}
	}
	if equality.Semantic.DeepEqual(before, ds) {
		return nil
	}
	return r.Client.Update(ctx, ds)
}
