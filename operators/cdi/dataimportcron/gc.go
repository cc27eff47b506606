package dataimportcron

import (
	"context"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ImportsToKeep gives how many imports the cron's garbage collection
// keeps: spec.importsToKeep when set and >= 0, else DefaultImportsToKeep.
func ImportsToKeep(cron *cdiv1.DataImportCron) int {
	if n := cron.Spec.ImportsToKeep; n != nil && *n >= 0 {
		return int(*n)
	}
	return DefaultImportsToKeep
}

// collect deletes the cron's imports beyond ImportsToKeep (those being
// deleted already not counted: a PVC waits for kube-controller-manager's
// pvc-protection controller), least recently used first (the PVCs'
// lastUseTime, else their DataVolume's): the DataVolume or, when it is
// gone, the PVC; and, when there are more DataVolumes than that, those whose
// PVC is not labelled for the cron. Nothing under garbageCollect Never.
// CDI's garbageCollectOldImports and garbageCollectPVCs.
func (r *Reconciler) collect(ctx context.Context, cron *cdiv1.DataImportCron) error {
	if gc := cron.Spec.GarbageCollect; gc != nil && *gc != cdiv1.DataImportCronGarbageCollectOutdated {
		return nil
	}
	keep := ImportsToKeep(cron)
	sel := client.MatchingLabels{LabelCron: cron.Name}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.Client.List(ctx, pvcs, client.InNamespace(cron.Namespace), sel); err != nil {
		return err
	}
	dvs := &cdiv1.DataVolumeList{}
	if err := r.Client.List(ctx, dvs, client.InNamespace(cron.Namespace), sel); err != nil {
		return err
	}
	// CDI's PVCs carry their DataVolume's lastUseTime from the start;
	// converge's DataVolume controller does not copy annotations, so a
	// PVC not yet touched is as recent as its DataVolume.
	used := map[string]string{}
	for _, dv := range dvs.Items {
		used[dv.Name] = dv.Annotations[AnnLastUseTime]
	}
	lastUse := func(p corev1.PersistentVolumeClaim) string {
		if t := p.Annotations[AnnLastUseTime]; t != "" {
			return t
		}
		return used[p.Name]
	}
	live := slices.DeleteFunc(pvcs.Items, func(p corev1.PersistentVolumeClaim) bool { return p.DeletionTimestamp != nil })
	if len(live) > keep {
		sort.Slice(live, func(i, j int) bool { return lastUse(live[i]) > lastUse(live[j]) })
		for _, p := range live[keep:] {
			r.log(cron).Info("deleting an outdated import", "name", p.Name)
			if err := r.deleteImport(ctx, p.Namespace, p.Name); err != nil {
				return err
			}
		}
	}
	dvs.Items = slices.DeleteFunc(dvs.Items, func(dv cdiv1.DataVolume) bool { return dv.DeletionTimestamp != nil })
	if len(dvs.Items) <= keep {
		return nil
	}
	for _, dv := range dvs.Items {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: dv.Namespace, Name: dv.Name}, pvc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if pvc.Labels[LabelCron] != cron.Name {
			if err := r.deleteImport(ctx, dv.Namespace, dv.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteImport deletes the DataVolume, or the PVC when the DataVolume is
// gone (CDI's deleteDvPvc).
func (r *Reconciler) deleteImport(ctx context.Context, namespace, name string) error {
	om := metav1.ObjectMeta{Namespace: namespace, Name: name}
	if err := r.Client.Delete(ctx, &cdiv1.DataVolume{ObjectMeta: om}); err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: om}))
}

// cleanup deletes the DataSources, DataVolumes and PVCs labelled for the
// deleted cron's cleanup (retentionPolicy None), as CDI's cleanup.
func (r *Reconciler) cleanup(ctx context.Context, cron types.NamespacedName) error {
	opts := []client.DeleteAllOfOption{client.InNamespace(cron.Namespace), client.MatchingLabels{LabelCron: cron.Name, LabelCleanup: "true"}}
	for _, obj := range []client.Object{&cdiv1.DataSource{}, &cdiv1.DataVolume{}, &corev1.PersistentVolumeClaim{}} {
		if err := r.Client.DeleteAllOf(ctx, obj, opts...); err != nil {
			return err
		}
	}
	return nil
}
