package dataimportcron

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type metaTime = metav1.Time

func metaNow() metav1.Time { return metav1.Now() }

// poll is CDI's pollSourceDigest for a registry URL with a schedule: when
// nextCronTime has passed (or was never set) the registry is asked for
// the digest, lastCronTime is set and, if it changed, the desired digest;
// then nextCronTime becomes the schedule's next time after now and the
// result asks to be requeued then. A schedule that does not parse is a
// Warning event InvalidSchedule and no requeue (a spec change brings the
// cron back); a failed poll a Warning event DigestPollFailed and a
// requeue after Options.RetryAfter, nextCronTime unchanged.
func (r *Reconciler) poll(ctx context.Context, cron *cdiv1.DataImportCron) reconcile.Result {
	if cron.Spec.Schedule == "" || registryURL(cron) == "" {
		return reconcile.Result{}
	}
	now := time.Now()
	if _, err := NextTime(cron.Spec.Schedule, now); err != nil {
		r.event(cron, corev1.EventTypeWarning, "InvalidSchedule", err.Error())
		return reconcile.Result{}
	}
	due, err := pollDue(cron.Annotations[AnnNextCronTime], now)
	if err != nil {
		r.log(cron).Info("re-polling", "error", err.Error())
		due = true
	}
	if due {
		digest, err := r.Digest(ctx, cron)
		if err != nil {
			r.event(cron, corev1.EventTypeWarning, "DigestPollFailed", err.Error())
			return reconcile.Result{RequeueAfter: r.Options.RetryAfter}
		}
		setAnnotation(cron, AnnLastCronTime, now.UTC().Format(time.RFC3339))
		if digest != cron.Annotations[AnnDesiredDigest] {
			r.log(cron).Info("new source digest", "digest", digest)
			setAnnotation(cron, AnnDesiredDigest, digest)
		}
	}
	next, _ := NextTime(cron.Spec.Schedule, now)
	setAnnotation(cron, AnnNextCronTime, next.UTC().Format(time.RFC3339))
	return reconcile.Result{RequeueAfter: next.Sub(now)}
}

func (r *Reconciler) event(cron *cdiv1.DataImportCron, kind, reason, msg string) {
	if r.Events != nil {
		r.Events.Event(cron, kind, reason, msg)
	}
	r.log(cron).Info(msg, "reason", reason)
}

func setAnnotation(obj metav1.Object, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}

func setLabel(obj metav1.Object, key, value string) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[key] = value
	obj.SetLabels(l)
}
