package metrics

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	a      = SyncKey{Namespace: "ns", Name: "a"}
	b      = SyncKey{Namespace: "ns", Name: "b"}
	aOther = SyncKey{Namespace: "other", Name: "a"}
)

func newRecorder(t *testing.T) (*Recorder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	r, err := NewRecorder(reg)
	if err != nil {
		t.Fatal(err)
	}
	return r, reg
}

// series gathers reg into "name{label="value",...}" → value, one entry
// per counter/gauge series and a _count and _sum entry per histogram
// series, so a test can compare every series at once.
func series(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			lab := "{" + strings.Join(ls, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[mf.GetName()+lab] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[mf.GetName()+lab] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"+lab] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+lab] = m.GetHistogram().GetSampleSum()
			default:
				t.Fatalf("unexpected metric type %s of %s", mf.GetType(), mf.GetName())
			}
		}
	}
	return out
}

func entries(actions ...ssa.Action) *ssa.ChangeSet {
	cs := ssa.NewChangeSet()
	for i, act := range actions {
		cs.Add(ssa.ChangeSetEntry{Subject: fmt.Sprintf("ConfigMap/ns/cm%d", i), Action: act})
	}
	return cs
}

func cond(typ string, s metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: typ, Status: s, Reason: "R", Message: "m"}
}

// TestRecorderSeries checks that each method moves exactly the series it
// documents and nothing else.
func TestRecorderSeries(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name   string
		record func(r *Recorder)
		want   map[string]float64
	}{
		{
			name:   "nothing recorded",
			record: func(*Recorder) {},
			want:   map[string]float64{},
		},
		{
			name: "reconcile success and failure",
			record: func(r *Recorder) {
				r.RecordReconcile(a, 1500*time.Millisecond, nil)
				r.RecordReconcile(a, 500*time.Millisecond, nil)
				r.RecordReconcile(a, 2*time.Second, boom)
			},
			want: map[string]float64{
				`converge_reconcile_duration_seconds_count{name="a",namespace="ns",result="success"}`: 2,
				`converge_reconcile_duration_seconds_sum{name="a",namespace="ns",result="success"}`:   2,
				`converge_reconcile_duration_seconds_count{name="a",namespace="ns",result="failure"}`: 1,
				`converge_reconcile_duration_seconds_sum{name="a",namespace="ns",result="failure"}`:   2,
			},
		},
		{
			name: "a status refresh is not a reconcile",
			record: func(r *Recorder) {
				r.RecordRefresh(a, 20*time.Millisecond, nil)
				r.RecordRefresh(a, 30*time.Millisecond, boom)
			},
			want: map[string]float64{
				`converge_status_refresh_duration_seconds_count{name="a",namespace="ns",result="success"}`: 1,
				`converge_status_refresh_duration_seconds_sum{name="a",namespace="ns",result="success"}`:   0.02,
				`converge_status_refresh_duration_seconds_count{name="a",namespace="ns",result="failure"}`: 1,
				`converge_status_refresh_duration_seconds_sum{name="a",namespace="ns",result="failure"}`:   0.03,
			},
		},
		{
			name: "fetch success and failure",
			record: func(r *Recorder) {
				r.RecordFetch(a, 250*time.Millisecond, nil)
				r.RecordFetch(b, time.Second, boom)
			},
			want: map[string]float64{
				`converge_fetch_duration_seconds_count{name="a",namespace="ns",result="success"}`: 1,
				`converge_fetch_duration_seconds_sum{name="a",namespace="ns",result="success"}`:   0.25,
				`converge_fetch_duration_seconds_count{name="b",namespace="ns",result="failure"}`: 1,
				`converge_fetch_duration_seconds_sum{name="b",namespace="ns",result="failure"}`:   1,
			},
		},
		{
			name: "change set counts created, configured and deleted only",
			record: func(r *Recorder) {
				r.RecordChangeSet(a, entries(ssa.CreatedAction, ssa.CreatedAction, ssa.ConfiguredAction,
					ssa.UnchangedAction, ssa.UnchangedAction, ssa.SkippedAction, ssa.UnknownAction,
					ssa.DeletedAction, ssa.DeletedAction, ssa.DeletedAction))
				r.RecordChangeSet(a, entries(ssa.ConfiguredAction))
			},
			want: map[string]float64{
				`converge_objects_applied_total{action="created",name="a",namespace="ns"}`:    2,
				`converge_objects_applied_total{action="configured",name="a",namespace="ns"}`: 2,
				`converge_objects_pruned_total{name="a",namespace="ns"}`:                      3,
			},
		},
		{
			name: "change set of unchanged and skipped objects, and nil, create no series",
			record: func(r *Recorder) {
				r.RecordChangeSet(a, entries(ssa.UnchangedAction, ssa.SkippedAction))
				r.RecordChangeSet(a, nil)
				r.RecordChangeSet(a, ssa.NewChangeSet())
			},
			want: map[string]float64{},
		},
		{
			name: "drift by kind; zero and negative counts ignored",
			record: func(r *Recorder) {
				r.RecordDrift(a, "KubeVirt", 2)
				r.RecordDrift(a, "KubeVirt", 1)
				r.RecordDrift(a, "CDI", 1)
				r.RecordDrift(a, "SSP", 0)
				r.RecordDrift(a, "SSP", -1)
			},
			want: map[string]float64{
				`converge_drift_corrected_total{kind="KubeVirt",name="a",namespace="ns"}`: 3,
				`converge_drift_corrected_total{kind="CDI",name="a",namespace="ns"}`:      1,
			},
		},
		{
			name: "revision keeps one series per Sync",
			record: func(r *Recorder) {
				r.RecordRevision(a, "main@sha1:1111")
				r.RecordRevision(b, "main@sha1:2222")
				r.RecordRevision(aOther, "main@sha1:3333")
				r.RecordRevision(a, "main@sha1:4444")
			},
			want: map[string]float64{
				`converge_last_applied_revision_info{name="a",namespace="ns",revision="main@sha1:4444"}`:    1,
				`converge_last_applied_revision_info{name="b",namespace="ns",revision="main@sha1:2222"}`:    1,
				`converge_last_applied_revision_info{name="a",namespace="other",revision="main@sha1:3333"}`: 1,
			},
		},
		{
			name: "condition: 1 for the current status, 0 for the others",
			record: func(r *Recorder) {
				r.RecordCondition(a, cond("Ready", metav1.ConditionTrue))
				r.RecordCondition(a, cond("Ready", metav1.ConditionFalse))
				r.RecordCondition(a, cond("Stalled", metav1.ConditionUnknown))
			},
			want: map[string]float64{
				`converge_sync_condition{name="a",namespace="ns",status="True",type="Ready"}`:      0,
				`converge_sync_condition{name="a",namespace="ns",status="False",type="Ready"}`:     1,
				`converge_sync_condition{name="a",namespace="ns",status="Unknown",type="Ready"}`:   0,
				`converge_sync_condition{name="a",namespace="ns",status="True",type="Stalled"}`:    0,
				`converge_sync_condition{name="a",namespace="ns",status="False",type="Stalled"}`:   0,
				`converge_sync_condition{name="a",namespace="ns",status="Unknown",type="Stalled"}`: 1,
			},
		},
		{
			name: "suspend 1 then 0",
			record: func(r *Recorder) {
				r.RecordSuspend(a, true)
				r.RecordSuspend(b, true)
				r.RecordSuspend(b, false)
			},
			want: map[string]float64{
				`converge_sync_suspended{name="a",namespace="ns"}`: 1,
				`converge_sync_suspended{name="b",namespace="ns"}`: 0,
			},
		},
		{
			name: "delete removes every series of the Sync and only those",
			record: func(r *Recorder) {
				for _, k := range []SyncKey{a, aOther} {
					r.RecordReconcile(k, time.Second, nil)
					r.RecordRefresh(k, time.Second, nil)
					r.RecordFetch(k, time.Second, boom)
					r.RecordChangeSet(k, entries(ssa.CreatedAction, ssa.ConfiguredAction, ssa.DeletedAction))
					r.RecordDrift(k, "KubeVirt", 1)
					r.RecordRevision(k, "main@sha1:1111")
					r.RecordCondition(k, cond("Ready", metav1.ConditionTrue))
					r.RecordSuspend(k, false)
				}
				r.Delete(a)
				r.Delete(b) // never recorded: no effect
			},
			want: map[string]float64{
				`converge_reconcile_duration_seconds_count{name="a",namespace="other",result="success"}`:      1,
				`converge_reconcile_duration_seconds_sum{name="a",namespace="other",result="success"}`:        1,
				`converge_status_refresh_duration_seconds_count{name="a",namespace="other",result="success"}`: 1,
				`converge_status_refresh_duration_seconds_sum{name="a",namespace="other",result="success"}`:   1,
				`converge_fetch_duration_seconds_count{name="a",namespace="other",result="failure"}`:          1,
				`converge_fetch_duration_seconds_sum{name="a",namespace="other",result="failure"}`:            1,
				`converge_objects_applied_total{action="created",name="a",namespace="other"}`:                 1,
				`converge_objects_applied_total{action="configured",name="a",namespace="other"}`:              1,
				`converge_objects_pruned_total{name="a",namespace="other"}`:                                   1,
				`converge_drift_corrected_total{kind="KubeVirt",name="a",namespace="other"}`:                  1,
				`converge_last_applied_revision_info{name="a",namespace="other",revision="main@sha1:1111"}`:   1,
				`converge_sync_condition{name="a",namespace="other",status="True",type="Ready"}`:              1,
				`converge_sync_condition{name="a",namespace="other",status="False",type="Ready"}`:             0,
				`converge_sync_condition{name="a",namespace="other",status="Unknown",type="Ready"}`:           0,
				`converge_sync_suspended{name="a",namespace="other"}`:                                         0,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, reg := newRecorder(t)
			tt.record(r)
			got := series(t, reg)
			if !maps.Equal(got, tt.want) {
				t.Errorf("series:\n got %s\nwant %s", dump(got), dump(tt.want))
			}
		})
	}
}

func dump(m map[string]float64) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, fmt.Sprintf("%s %g", k, m[k]))
	}
	return "\n  " + strings.Join(lines, "\n  ")
}

// TestReconcileBuckets checks the exposition of one observation,
// buckets included, with testutil.GatherAndCompare.
func TestReconcileBuckets(t *testing.T) {
	r, reg := newRecorder(t)
	r.RecordReconcile(a, 3*time.Second, nil)
	want := `
# HELP converge_reconcile_duration_seconds Duration in seconds of a Sync's reconcile (fetch, render, apply, prune, health gates), by result.
# TYPE converge_reconcile_duration_seconds histogram
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="0.01"} 0
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="0.025"} 0
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="0.05"} 0
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="0.1"} 0
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="0.25"} 0
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="0.5"} 0
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="1"} 0
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="2.5"} 0
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="5"} 1
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="10"} 1
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="30"} 1
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="60"} 1
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="120"} 1
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="300"} 1
converge_reconcile_duration_seconds_bucket{name="a",namespace="ns",result="success",le="+Inf"} 1
converge_reconcile_duration_seconds_sum{name="a",namespace="ns",result="success"} 3
converge_reconcile_duration_seconds_count{name="a",namespace="ns",result="success"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "converge_reconcile_duration_seconds"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(r.fetch); got != 0 {
		t.Errorf("fetch series after a reconcile: got %d, want 0", got)
	}
	r.RecordFetch(a, 90*time.Second, nil)
	// 90 s is above the last finite fetch bucket (60 s): only +Inf holds it.
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "converge_fetch_duration_seconds" {
			continue
		}
		bs := mf.GetMetric()[0].GetHistogram().GetBucket()
		if len(bs) != len(FetchBuckets) || bs[len(bs)-1].GetUpperBound() != 60 || bs[len(bs)-1].GetCumulativeCount() != 0 {
			t.Errorf("fetch buckets: %v", bs)
		}
	}
}

func TestNewRecorderTwice(t *testing.T) {
	r, reg := newRecorder(t)
	if _, err := NewRecorder(reg); err == nil {
		t.Fatal("second NewRecorder with the same registry: got nil error")
	} else if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
		t.Fatalf("second NewRecorder: got %v, want an AlreadyRegisteredError", err)
	}
	// The first Recorder's registration is intact.
	r.RecordSuspend(a, true)
	if got := series(t, reg); len(got) != 1 || got[`converge_sync_suspended{name="a",namespace="ns"}`] != 1 {
		t.Errorf("after the failed second registration: %v", got)
	}
}

// TestNewRecorderPartialConflict: when the registry refuses one
// collector, the ones registered before it are unregistered again.
func TestNewRecorderPartialConflict(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	// The same metric as the fourth collector of NewRecorder, registered
	// by someone else first.
	squatter := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "converge_objects_pruned_total",
		Help: "Objects a Sync deleted because they left its config.",
	}, []string{"namespace", "name"})
	reg.MustRegister(squatter)
	if _, err := NewRecorder(reg); err == nil {
		t.Fatal("NewRecorder with a conflicting collector: got nil error")
	}
	// Nothing of the failed Recorder stays: once the squatter is gone a
	// new Recorder registers all its collectors, including those the
	// failed one had registered before the conflict.
	reg.Unregister(squatter)
	if _, err := NewRecorder(reg); err != nil {
		t.Errorf("NewRecorder after the conflict was removed: %v", err)
	}
}

func TestControllerRuntimeRegistry(t *testing.T) {
	r, err := NewRecorder(crmetrics.Registry)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range r.collectors() {
			crmetrics.Registry.Unregister(c)
		}
	})
	r.RecordSuspend(b, true)
	if got := testutil.ToFloat64(r.suspended.WithLabelValues("ns", "b")); got != 1 {
		t.Errorf("converge_sync_suspended: got %g, want 1", got)
	}
	// Served by the controller's registry alongside controller-runtime's own.
	if n, err := testutil.GatherAndCount(crmetrics.Registry, "converge_sync_suspended"); err != nil || n != 1 {
		t.Errorf("converge_sync_suspended in controller-runtime's registry: %d series, %v", n, err)
	}
}

func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.RecordReconcile(a, time.Second, nil)
	r.RecordFetch(a, time.Second, nil)
	r.RecordChangeSet(a, entries(ssa.CreatedAction))
	r.RecordDrift(a, "KubeVirt", 1)
	r.RecordRevision(a, "x")
	r.RecordCondition(a, cond("Ready", metav1.ConditionTrue))
	r.RecordSuspend(a, true)
	r.Delete(a)
}

// TestRevisionConcurrent: concurrent RecordRevision calls for one Sync
// leave exactly one series (run with -race).
func TestRevisionConcurrent(t *testing.T) {
	r, reg := newRecorder(t)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.RecordRevision(a, fmt.Sprintf("main@sha1:%d", i))
			r.RecordReconcile(a, time.Millisecond, nil)
		}()
	}
	wg.Wait()
	if n := testutil.CollectAndCount(r.revision); n != 1 {
		t.Errorf("revision series of one Sync after 50 concurrent records: %d, want 1", n)
	}
	if n, _ := testutil.GatherAndCount(reg, "converge_reconcile_duration_seconds"); n != 1 {
		t.Errorf("reconcile series: %d, want 1", n)
	}
}
