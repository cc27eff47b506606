package dataimportcron

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Reconciler reconciles DataImportCrons (see the package doc), following
// CDI's DataImportCronReconciler.Reconcile and update.
type Reconciler struct {
	// Client reads (cached) and writes crons, DataVolumes, PVCs and
	// DataSources.
	Client client.Client
	// Events records ErrDataSourceAlreadyManaged, DigestPollFailed and
	// InvalidSchedule.
	Events record.EventRecorder
	// Digest gives the digest a cron's registry URL names now
	// (Digester.Digest).
	Digest func(ctx context.Context, cron *cdiv1.DataImportCron) (string, error)
	// Options gives RetryAfter.
	Options Options
}

// Reconcile takes the cron req names through one round of CDI's update:
// the current import's state, success (status, DataSource, garbage
// collection), the poll when due, a new import when the digest changed,
// the conditions, then the cron's metadata and status written when they
// changed. A cron that is gone has its cleanup-labelled objects deleted.
// Errors of the API server are returned (retried with backoff), conflicts
// requeued at once; a failed poll is an event and a retry after
// Options.RetryAfter.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cron := &cdiv1.DataImportCron{}
	if err := r.Client.Get(ctx, req.NamespacedName, cron); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.cleanup(ctx, req.NamespacedName)
		}
		return reconcile.Result{}, err
	}
	if cron.DeletionTimestamp != nil {
		return reconcile.Result{}, r.cleanup(ctx, req.NamespacedName)
	}
	if ok, err := r.manages(ctx, cron); !ok || err != nil {
		return reconcile.Result{}, err
	}
	res, err := r.update(ctx, cron)
	switch {
	case apierrors.IsConflict(err):
		// A write raced another (the cache behind the cron's own last
		// write, or the DataVolume controller's on the PVC): again, at
		// once, from what the cache has then.
		return reconcile.Result{Requeue: true}, nil
	case err != nil:
		return reconcile.Result{}, err
	}
	return res, nil
}

// update is CDI's update for the pvc source format.
func (r *Reconciler) update(ctx context.Context, cron *cdiv1.DataImportCron) (reconcile.Result, error) {
	orig := cron.DeepCopy()
	imports := cron.Status.CurrentImports
	dv, pvc, err := r.importState(ctx, cron)
	if err != nil {
		return reconcile.Result{}, err
	}
	succeeded := false
	switch {
	case dv != nil:
		switch dv.Status.Phase {
		case cdiv1.Succeeded:
			if err := r.touch(ctx, cron, pvc); err != nil {
				return reconcile.Result{}, err
			}
			succeeded = true
		case cdiv1.ImportScheduled:
			setCondition(cron, cdiv1.DataImportCronProgressing, corev1.ConditionFalse, "Import is scheduled", ReasonScheduled)
		case cdiv1.ImportInProgress:
			setCondition(cron, cdiv1.DataImportCronProgressing, corev1.ConditionTrue, "Import is progressing", ReasonInProgress)
		default:
			phase := string(dv.Status.Phase)
			setCondition(cron, cdiv1.DataImportCronProgressing, corev1.ConditionFalse, "Import DataVolume phase "+phase, phase)
		}
	case pvc != nil && pvc.Status.Phase == corev1.ClaimBound:
		if err := r.touch(ctx, cron, pvc); err != nil {
			return reconcile.Result{}, err
		}
		succeeded = true
	default:
		if len(imports) > 0 {
			imports = imports[1:]
			cron.Status.CurrentImports = imports
		}
		setCondition(cron, cdiv1.DataImportCronProgressing, corev1.ConditionFalse, "No current import", ReasonNoImport)
	}
	if succeeded {
		name := cron.Status.CurrentImports[0].DataVolumeName
		if last := cron.Status.LastImportedPVC; last == nil || last.Name != name || last.Namespace != cron.Namespace {
			now := metaNow()
			cron.Status.LastImportedPVC = &cdiv1.DataVolumeSourcePVC{Namespace: cron.Namespace, Name: name}
			cron.Status.LastImportTimestamp = &now
		}
		setCondition(cron, cdiv1.DataImportCronProgressing, corev1.ConditionFalse, "No current import", ReasonNoImport)
		if err := r.collect(ctx, cron); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.updateDataSource(ctx, cron); err != nil {
		return reconcile.Result{}, err
	}
	res := r.poll(ctx, cron)

	desired := cron.Annotations[AnnDesiredDigest]
	switch {
	case desired != "" && (len(imports) == 0 || desired != imports[0].Digest):
		setCondition(cron, cdiv1.DataImportCronUpToDate, corev1.ConditionFalse, "Source digest updated since last import", ReasonOutdated)
		if dv != nil {
			if err := r.deleteErroneous(ctx, cron, dv); err != nil {
				return res, err
			}
		}
		if succeeded || len(imports) == 0 {
			if err := r.createImport(ctx, cron, desired); err != nil {
				return res, err
			}
		}
	case succeeded:
		format := cdiv1.DataImportCronSourceFormatPvc
		cron.Status.SourceFormat = &format
		setCondition(cron, cdiv1.DataImportCronUpToDate, corev1.ConditionTrue, "Latest import is up to date", ReasonUpToDate)
	case len(imports) > 0:
		setCondition(cron, cdiv1.DataImportCronUpToDate, corev1.ConditionFalse, "Import is progressing", ReasonInProgress)
	default:
		setCondition(cron, cdiv1.DataImportCronUpToDate, corev1.ConditionFalse, "No source digest", ReasonNoDigest)
	}
	if last := cron.Annotations[AnnLastCronTime]; last != "" {
		t, err := time.Parse(time.RFC3339, last)
		if err != nil {
			return res, fmt.Errorf("annotation %s %q: %w", AnnLastCronTime, last, err)
		}
		if ts := cron.Status.LastExecutionTimestamp; ts == nil || !ts.Time.Equal(t) {
			cron.Status.LastExecutionTimestamp = &metaTime{Time: t}
		}
	}
	return res, r.persist(ctx, orig, cron)
}

// importState gives the current import's DataVolume and PVC (nil when
// absent), as CDI's getImportState.
func (r *Reconciler) importState(ctx context.Context, cron *cdiv1.DataImportCron) (*cdiv1.DataVolume, *corev1.PersistentVolumeClaim, error) {
	if len(cron.Status.CurrentImports) == 0 {
		return nil, nil, nil
	}
	key := types.NamespacedName{Namespace: cron.Namespace, Name: cron.Status.CurrentImports[0].DataVolumeName}
	dv := &cdiv1.DataVolume{}
	if err := r.Client.Get(ctx, key, dv); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		dv = nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, key, pvc); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		pvc = nil
	}
	return dv, pvc, nil
}

// persist writes the cron's metadata (an update) and its status (the
// status subresource) when they differ from orig; cron keeps the status
// it was given.
func (r *Reconciler) persist(ctx context.Context, orig, cron *cdiv1.DataImportCron) error {
	status := cron.Status.DeepCopy()
	if !equality.Semantic.DeepEqual(orig.ObjectMeta, cron.ObjectMeta) {
		if err := r.Client.Update(ctx, cron); err != nil {
			return err
		}
		cron.Status = *status
	}
	if !equality.Semantic.DeepEqual(orig.Status, *status) {
		return r.Client.Status().Update(ctx, cron)
	}
	return nil
}

func (r *Reconciler) log(cron *cdiv1.DataImportCron) interface {
	Info(string, ...any)
} {
	return ctrl.Log.WithName("dataimportcron").WithValues("namespace", cron.Namespace, "name", cron.Name)
}
