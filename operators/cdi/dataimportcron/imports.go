package dataimportcron

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createImport records the import of digest in the cron's status and
// creates its DataVolume (NewDataVolume), unless a PVC of that name
// already holds it (then only its lastUseTime is renewed), as CDI's
// createImportDataVolume. It fails on a malformed digest or an API error
// other than AlreadyExists.
func (r *Reconciler) createImport(ctx context.Context, cron *cdiv1.DataImportCron, digest string) error {
	name, err := DataVolumeName(cron.Spec.ManagedDataSource, digest)
	if err != nil {
		return err
	}
	cron.Status.CurrentImports = []cdiv1.ImportStatus{{DataVolumeName: name, Digest: digest}}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cron.Namespace, Name: name}, pvc); err == nil {
		return r.touch(ctx, cron, pvc)
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	dv := NewDataVolume(cron, name, digest, time.Now())
	r.log(cron).Info("importing", "dataVolume", name, "url", *dv.Spec.Source.Registry.URL)
	if err := r.Client.Create(ctx, dv); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// NewDataVolume gives the DataVolume of the cron's import of digest named
// name, as CDI's newSourceDataVolume: spec.template with its registry URL
// pinned to digest (PinDigest), in the cron's namespace, the cron's
// labels (cronLabels), the passed labels and retainAfterCompletion
// annotation of the cron, immediate binding requested and lastUseTime now.
func NewDataVolume(cron *cdiv1.DataImportCron, name, digest string, now time.Time) *cdiv1.DataVolume {
	dv := cron.Spec.Template.DeepCopy()
	if url := registryURL(cron); url != "" {
		pinned := PinDigest(url, digest)
		dv.Spec.Source.Registry.URL = &pinned
	}
	dv.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: cron.Namespace, Labels: dv.Labels, Annotations: dv.Annotations}
	cronLabels(cron, dv)
	setAnnotation(dv, AnnImmediateBinding, "true")
	setAnnotation(dv, AnnLastUseTime, now.UTC().Format(time.RFC3339Nano))
	if v := cron.Annotations[AnnPodRetainAfterCompletion]; v != "" {
		setAnnotation(dv, AnnPodRetainAfterCompletion, v)
	}
	passLabels(cron, dv)
	return dv
}

// cronLabels puts CDI's recommended labels (managed-by cdi-controller,
// component storage, kept when already set) and the cron's label on obj,
// and the cleanup label under retentionPolicy None (CDI's
// setDataImportCronResourceLabels).
func cronLabels(cron *cdiv1.DataImportCron, obj metav1.Object) {
	l := obj.GetLabels()
	if l[labelManagedBy] == "" {
		setLabel(obj, labelManagedBy, controllerName)
	}
	if l[labelComponent] == "" {
		setLabel(obj, labelComponent, "storage")
	}
	setLabel(obj, LabelCron, cron.Name)
	if p := cron.Spec.RetentionPolicy; p != nil && *p == cdiv1.DataImportCronRetainNone {
		setLabel(obj, LabelCleanup, "true")
	}
}

// passLabels copies the cron's instancetype and credential labels to obj.
func passLabels(cron *cdiv1.DataImportCron, obj metav1.Object) {
	for _, k := range passedLabels {
		if v := cron.Labels[k]; v != "" {
			setLabel(obj, k, v)
		}
	}
}

// touch renews the import's lastUseTime (the garbage collection's order)
// and the cron's labels on obj (a PVC; nil: nothing), as CDI's
// updateSource.
func (r *Reconciler) touch(ctx context.Context, cron *cdiv1.DataImportCron, obj client.Object) error {
	if obj == nil || isNil(obj) {
		return nil
	}
	before := obj.DeepCopyObject()
	setAnnotation(obj, AnnLastUseTime, time.Now().UTC().Format(time.RFC3339Nano))
	cronLabels(cron, obj)
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	return r.Client.Update(ctx, obj)
}

func isNil(obj client.Object) bool {
	p, ok := obj.(*corev1.PersistentVolumeClaim)
	return ok && p == nil
}

// deleteErroneous deletes the cron's current DataVolume when its import
// failed (phase Failed, or Running=False with CDI's Error or
// ImagePullFailed reason) and forgets the import, so that the next digest
// is imported afresh (CDI's deleteErroneousDataVolume). The DataVolume is
// unlabelled first, so its deletion does not bring the cron back before
// its status is written.
func (r *Reconciler) deleteErroneous(ctx context.Context, cron *cdiv1.DataImportCron, dv *cdiv1.DataVolume) error {
	failed := dv.Status.Phase == cdiv1.Failed
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeRunning && c.Status == corev1.ConditionFalse && (c.Reason == "Error" || c.Reason == "ImagePullFailed") {
			failed = true
		}
	}
	if !failed {
		return nil
	}
	r.log(cron).Info("deleting the failed import", "dataVolume", dv.Name)
	dv.Labels[LabelCron] = ""
	if err := r.Client.Update(ctx, dv); client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := r.Client.Delete(ctx, dv); client.IgnoreNotFound(err) != nil {
		return err
	}
	cron.Status.CurrentImports = nil
	return nil
}
