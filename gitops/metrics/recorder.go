// Package metrics records converge-controller's Prometheus metrics: the
// duration of each Sync's reconciles and fetches, the objects it applied,
// pruned and corrected, its last applied revision, its conditions and
// whether it is suspended.
//
// Every series carries the Sync's "namespace" and "name" labels. The
// metric names and label sets follow Flux's (fluxcd/pkg/runtime/metrics:
// gotk_reconcile_duration_seconds, gotk_reconcile_condition, gotk_suspend_status)
// with converge's prefix and without the "kind" label, since converge has
// one kind (Sync):
//
//	converge_reconcile_duration_seconds{namespace,name,result}   histogram, ReconcileBuckets
//	converge_status_refresh_duration_seconds{namespace,name,result} histogram, ReconcileBuckets
//	converge_fetch_duration_seconds{namespace,name,result}       histogram, FetchBuckets
//	converge_objects_applied_total{namespace,name,action}        counter, action=created|configured
//	converge_objects_pruned_total{namespace,name}                counter
//	converge_drift_corrected_total{namespace,name,kind}          counter
//	converge_last_applied_revision_info{namespace,name,revision} gauge, always 1, one series per Sync
//	converge_sync_condition{namespace,name,type,status}          gauge, 1 for the current status, 0 for the others
//	converge_sync_suspended{namespace,name}                      gauge, 0 or 1
//
// result is "success" when the recorded error is nil, else "failure". A
// status refresh (a reconcile that only status-only changes of applied
// objects asked for, answered without fetch, render or apply) is not a
// reconcile: it is observed in converge_status_refresh_duration_seconds
// only, so the reconcile count is the count of applies.
package metrics

import (
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label values of the "result" label.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

// ReconcileBuckets are the upper bounds, in seconds, of
// converge_reconcile_duration_seconds: 10 ms (a no-op resync that skips
// every object) to 300 s (the default spec.timeout, 5m, so a reconcile
// that times out lands in the last finite bucket).
var ReconcileBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// FetchBuckets are the upper bounds, in seconds, of
// converge_fetch_duration_seconds: 10 ms (an up-to-date local clone) to
// 60 s (the default spec.source.timeout of one Git operation).
var FetchBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// conditionStatuses are the values of the "status" label of
// converge_sync_condition; RecordCondition sets all of them (as Flux's
// gotk_reconcile_condition, fluxcd/pkg/runtime/metrics.Recorder.RecordCondition).
var conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}

// SyncKey identifies a Sync: its namespace and name.
type SyncKey struct{ Namespace, Name string }

func (k SyncKey) labels() prometheus.Labels {
	return prometheus.Labels{"namespace": k.Namespace, "name": k.Name}
}

// Recorder records converge's metrics; safe for concurrent use. Its
// methods are no-ops on a nil *Recorder, so a controller built without
// metrics can pass nil.
type Recorder struct {
	reconcile *prometheus.HistogramVec
	refresh   *prometheus.HistogramVec
	fetch     *prometheus.HistogramVec
	applied   *prometheus.CounterVec
	pruned    *prometheus.CounterVec
	drift     *prometheus.CounterVec
	revision  *prometheus.GaugeVec
	condition *prometheus.GaugeVec
	suspended *prometheus.GaugeVec

	// mu serialises RecordRevision and Delete, so that a Sync never keeps
	// two revision series.
	mu sync.Mutex
}

// NewRecorder creates the collectors, registers them with reg (the
// controller passes sigs.k8s.io/controller-runtime/pkg/metrics.Registry)
// and returns the Recorder. It returns an error, and registers nothing,
// when reg refuses one of them (registering twice with one registry gives
// a prometheus.AlreadyRegisteredError).
func NewRecorder(reg prometheus.Registerer) (*Recorder, error) {
	syncLabels := []string{"namespace", "name"}
	with := func(extra ...string) []string { return append(append([]string{}, syncLabels...), extra...) }
	r := &Recorder{
		reconcile: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "converge_reconcile_duration_seconds",
			Help:    "Duration in seconds of a Sync's reconcile (fetch, render, apply, prune, health gates), by result.",
			Buckets: ReconcileBuckets,
		}, with("result")),
		refresh: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "converge_status_refresh_duration_seconds",
			Help:    "Duration in seconds of a Sync's status refresh (health and HyperConverged status recomputed after status-only changes, nothing applied), by result.",
			Buckets: ReconcileBuckets,
		}, with("result")),
		fetch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "converge_fetch_duration_seconds",
			Help:    "Duration in seconds of fetching a Sync's Git source, by result.",
			Buckets: FetchBuckets,
		}, with("result")),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_objects_applied_total",
			Help: "Objects a Sync created or configured with server-side apply.",
		}, with("action")),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_objects_pruned_total",
			Help: "Objects a Sync deleted because they left its config.",
		}, syncLabels),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_drift_corrected_total",
			Help: "Objects whose drift from the desired state a Sync corrected, by kind.",
		}, with("kind")),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "converge_last_applied_revision_info",
			Help: "The revision a Sync last applied without error (value always 1).",
		}, with("revision")),
		condition: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "converge_sync_condition",
			Help: "A Sync's condition: 1 for its current status, 0 for the other statuses.",
		}, with("type", "status")),
		suspended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "converge_sync_suspended",
			Help: "1 when the Sync is suspended (spec.suspend), else 0.",
		}, syncLabels),
	}
	var done []prometheus.Collector
	for _, c := range r.collectors() {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, fmt.Errorf("registering converge metrics: %w", err)
		}
		done = append(done, c)
	}
	return r, nil
}

func (r *Recorder) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.reconcile, r.refresh, r.fetch, r.applied, r.pruned, r.drift, r.revision, r.condition, r.suspended}
}

func result(err error) string {
	if err != nil {
		return ResultFailure
	}
	return ResultSuccess
}

// RecordReconcile observes d, in seconds, in
// converge_reconcile_duration_seconds{namespace,name,result}; result is
// "failure" when err is non-nil.
func (r *Recorder) RecordReconcile(k SyncKey, d time.Duration, err error) {
	if r == nil {
		return
	}
	r.reconcile.WithLabelValues(k.Namespace, k.Name, result(err)).Observe(d.Seconds())
}

// RecordRefresh observes d, in seconds, in
// converge_status_refresh_duration_seconds{namespace,name,result}; result
// is "failure" when err is non-nil.
func (r *Recorder) RecordRefresh(k SyncKey, d time.Duration, err error) {
	if r == nil {
		return
	}
	r.refresh.WithLabelValues(k.Namespace, k.Name, result(err)).Observe(d.Seconds())
}

// RecordFetch observes d, in seconds, in
// converge_fetch_duration_seconds{namespace,name,result}; result is
// "failure" when err is non-nil.
func (r *Recorder) RecordFetch(k SyncKey, d time.Duration, err error) {
	if r == nil {
		return
	}
	r.fetch.WithLabelValues(k.Namespace, k.Name, result(err)).Observe(d.Seconds())
}

// RecordChangeSet counts cs's entries: ssa.CreatedAction and
// ssa.ConfiguredAction in converge_objects_applied_total{action=created|configured},
// ssa.DeletedAction in converge_objects_pruned_total. Unchanged, skipped
// and unknown entries are not counted. A nil cs records nothing.
func (r *Recorder) RecordChangeSet(k SyncKey, cs *ssa.ChangeSet) {
	if r == nil || cs == nil {
		return
	}
	var created, configured, deleted int
	for _, e := range cs.Entries {
		switch e.Action {
		case ssa.CreatedAction:
			created++
		case ssa.ConfiguredAction:
			configured++
		case ssa.DeletedAction:
			deleted++
		}
	}
	if created > 0 {
		r.applied.WithLabelValues(k.Namespace, k.Name, string(ssa.CreatedAction)).Add(float64(created))
	}
	if configured > 0 {
		r.applied.WithLabelValues(k.Namespace, k.Name, string(ssa.ConfiguredAction)).Add(float64(configured))
	}
	if deleted > 0 {
		r.pruned.WithLabelValues(k.Namespace, k.Name).Add(float64(deleted))
	}
}

// RecordDrift adds n to converge_drift_corrected_total{namespace,name,kind}:
// n objects of kind (e.g. "KubeVirt") were re-applied because someone
// changed them. n <= 0 records nothing.
func (r *Recorder) RecordDrift(k SyncKey, kind string, n int) {
	if r == nil || n <= 0 {
		return
	}
	r.drift.WithLabelValues(k.Namespace, k.Name, kind).Add(float64(n))
}

// RecordRevision sets converge_last_applied_revision_info{namespace,name,revision}
// to 1 and removes the series of the Sync's previous revision, so each
// Sync has exactly one series (status.lastAppliedRevision, e.g.
// "main@sha1:<commit>").
func (r *Recorder) RecordRevision(k SyncKey, revision string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revision.DeletePartialMatch(k.labels())
	r.revision.WithLabelValues(k.Namespace, k.Name, revision).Set(1)
}

// RecordCondition sets converge_sync_condition{namespace,name,type=c.Type,status}
// to 1 for status=c.Status and to 0 for the other statuses of True, False
// and Unknown, as Flux's gotk_reconcile_condition
// (fluxcd/pkg/runtime/metrics.Recorder.RecordCondition).
func (r *Recorder) RecordCondition(k SyncKey, c metav1.Condition) {
	if r == nil {
		return
	}
	for _, s := range conditionStatuses {
		v := 0.0
		if s == c.Status {
			v = 1
		}
		r.condition.WithLabelValues(k.Namespace, k.Name, c.Type, string(s)).Set(v)
	}
}

// RecordSuspend sets converge_sync_suspended{namespace,name} to 1 when
// suspended, else 0 (Flux's gotk_suspend_status).
func (r *Recorder) RecordSuspend(k SyncKey, suspended bool) {
	if r == nil {
		return
	}
	v := 0.0
	if suspended {
		v = 1
	}
	r.suspended.WithLabelValues(k.Namespace, k.Name).Set(v)
}

// Delete removes every series of the Sync from every metric, for a Sync
// that was deleted. Other Syncs' series, including those of a Sync of the
// same name in another namespace, stay.
func (r *Recorder) Delete(k SyncKey) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{r.reconcile, r.refresh, r.fetch, r.applied, r.pruned, r.drift, r.revision, r.condition, r.suspended} {
		v.DeletePartialMatch(k.labels())
	}
}
