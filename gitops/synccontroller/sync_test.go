package synccontroller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/receiver"
	"github.com/converge-dev/converge/gitops/synccontroller"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/gitserver"
)

var (
	hcKey = types.NamespacedName{Namespace: "kubevirt-hyperconverged", Name: "kubevirt-hyperconverged"}
	kvKey = types.NamespacedName{Namespace: "kubevirt-hyperconverged", Name: "kubevirt-kubevirt-hyperconverged"}
)

// get reads an object; it returns its error (NotFound, or NoMatch when
// the kind is not served).
func get(c client.Client, apiVersion, kind string, key types.NamespacedName) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, c.Get(context.Background(), key, u)
}

func absent(err error) bool { return apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) }

// events returns the reasons and messages of the core/v1 Events of a Sync.
func (e *testEnv) events(t *testing.T, name string) map[string][]string {
	t.Helper()
	list := &corev1.EventList{}
	if err := e.c1.List(context.Background(), list, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == v1alpha1.SyncKind && ev.InvolvedObject.Name == name {
			out[ev.Reason] = append(out[ev.Reason], ev.Message)
		}
	}
	return out
}

// metric sums the samples of family whose labels include want, from the
// Reconciler's registry and controller-runtime's.
func (e *testEnv) metric(t *testing.T, family string, want map[string]string) float64 {
	t.Helper()
	fams, err := prometheus.Gatherers{e.reg, ctrlmetrics.Registry}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
	next:
		for _, m := range f.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			sum += value(m)
		}
	}
	return sum
}

// settled polls the metric (e.metric) every 250ms until it has not moved
// for 3s, and returns it.
func (e *testEnv) settled(t *testing.T, family string, want map[string]string) float64 {
	t.Helper()
	v, since := e.metric(t, family, want), time.Now()
	for time.Since(since) < 3*time.Second {
		time.Sleep(250 * time.Millisecond)
		if n := e.metric(t, family, want); n != v {
			v, since = n, time.Now()
		}
	}
	return v
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// TestSync runs the Sync controller against two real API servers and a
// real Git server. The subtests run in order and share the clusters: each
// leaves the clusters as the next expects (documented per subtest).
func TestSync(t *testing.T) {
	e := startEnv(t)
	local := types.NamespacedName{Namespace: e.ns, Name: "local"}

	// Cluster 1 has no converge object yet: a Sync targeting cluster 2
	// applies there only. It is deleted with Orphan: the objects stay.
	t.Run("remote target", func(t *testing.T) {
		key := e.sync(t, "remote-only", func(s *v1alpha1.Sync) {
			s.Spec.Target = &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: "cluster2"}}}
		})
		s, d := e.wait(t, key, 2*time.Minute, "Ready", readyAt(e.head(t)))
		t.Logf("remote Sync Ready after %s", d)
		if _, err := get(e.c2, "kubevirt.io/v1", "KubeVirt", kvKey); err != nil {
			t.Errorf("KubeVirt in cluster 2: %v", err)
		}
		if _, err := get(e.c1, "hco.kubevirt.io/v1", "HyperConverged", hcKey); !absent(err) {
			t.Errorf("HyperConverged in cluster 1: err %v, want it absent", err)
		}
		if s.Status.Inventory == nil || len(s.Status.Inventory.Entries) < 10 {
			t.Fatalf("inventory %v, want the example's objects", s.Status.Inventory)
		}
		e.deleteSync(t, key, v1alpha1.DeletionPolicyOrphan)
		if _, err := get(e.c2, "kubevirt.io/v1", "KubeVirt", kvKey); err != nil {
			t.Errorf("KubeVirt in cluster 2 after deleting the Sync with Orphan: %v", err)
		}
	})

	// One controller drives both clusters from one repository: "remote"
	// (cluster 2) depends on "local" (cluster 1) and waits for it. Leaves
	// "local" Ready for the next subtests; "remote" is orphaned.
	t.Run("dependsOn and two clusters", func(t *testing.T) {
		rkey := e.sync(t, "remote", func(s *v1alpha1.Sync) {
			s.Spec.Target = &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: "cluster2"}}}
			s.Spec.DependsOn = []v1alpha1.SyncReference{{Name: local.Name}}
		})
		s, _ := e.wait(t, rkey, time.Minute, "DependencyNotReady", func(s *v1alpha1.Sync) bool {
			return condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.DependencyNotReadyReason
		})
		if c := condition(s, v1alpha1.ReconcilingCondition); c.Status != metav1.ConditionTrue {
			t.Errorf("Reconciling = %+v while the dependency is missing, want True", c)
		}
		if s.Status.LastAttemptedRevision != "" {
			t.Errorf("lastAttemptedRevision %q: the Sync fetched before its dependency was ready", s.Status.LastAttemptedRevision)
		}
		e.sync(t, local.Name, nil)
		ls, d := e.wait(t, local, 2*time.Minute, "local Ready", readyAt(e.head(t)))
		t.Logf("local Sync Ready after %s", d)
		rs, d := e.wait(t, rkey, time.Minute, "remote Ready", readyAt(e.head(t)))
		t.Logf("dependent Ready %s after its dependency", d)
		if lt, rt := condition(ls, v1alpha1.ReadyCondition).LastTransitionTime, condition(rs, v1alpha1.ReadyCondition).LastTransitionTime; rt.Before(&lt) {
			t.Errorf("dependent Ready at %s, before its dependency (%s)", rt, lt)
		}
		for i, c := range []client.Client{e.c1, e.c2} {
			if _, err := get(c, "kubevirt.io/v1", "KubeVirt", kvKey); err != nil {
				t.Errorf("KubeVirt in cluster %d: %v", i+1, err)
			}
		}
		e.deleteSync(t, rkey, v1alpha1.DeletionPolicyOrphan)
	})

	// "local" is Ready at the first commit.
	t.Run("status events metrics", func(t *testing.T) {
		s, _ := e.wait(t, local, time.Minute, "Ready", readyAt(e.head(t)))
		if s.Status.LastAttemptedRevision != s.Status.LastAppliedRevision {
			t.Errorf("lastAttempted %q != lastApplied %q", s.Status.LastAttemptedRevision, s.Status.LastAppliedRevision)
		}
		if !slices.Contains(s.Finalizers, v1alpha1.Finalizer) {
			t.Errorf("finalizers %v, want %s", s.Finalizers, v1alpha1.Finalizer)
		}
		for _, typ := range []string{v1alpha1.ReconcilingCondition, v1alpha1.StalledCondition} {
			if c := apimeta.FindStatusCondition(s.Status.Conditions, typ); c != nil {
				t.Errorf("%s present on a Ready Sync: %+v", typ, c)
			}
		}
		// spec.wait false: Ready once applied, while the components'
		// health stays reported: no operator runs the operand CRs on this
		// bare API server, so none has conditions.
		if c := condition(s, v1alpha1.HealthyCondition); c.Status != metav1.ConditionUnknown || c.Reason != v1alpha1.WaitingForHealthReason ||
			!strings.Contains(c.Message, "virt progressing") {
			t.Errorf("Healthy = %+v, want Unknown WaitingForHealth naming virt progressing", c)
		}
		health := map[string]v1alpha1.ComponentStatus{}
		for _, c := range s.Status.Components {
			health[c.Name] = c
		}
		if c := health["hco"]; c.Health != "Healthy" {
			t.Errorf("component hco = %+v, want Healthy", c)
		}
		if c := health["virt"]; c.Health != "Progressing" || !strings.Contains(c.Message, "KubeVirt/kubevirt-hyperconverged/kubevirt-kubevirt-hyperconverged has no conditions") {
			t.Errorf("component virt = %+v, want Progressing naming the KubeVirt without conditions", c)
		}
		// hpp dependsOn cdi, which is not healthy: without wait it is
		// applied all the same.
		if c := health["hpp"]; c.Health != "Progressing" {
			t.Errorf("component hpp = %+v, want Progressing (applied although cdi is not healthy)", c)
		}
		found := false
		for _, en := range s.Status.Inventory.Entries {
			found = found || en.ID == "kubevirt-hyperconverged_kubevirt-kubevirt-hyperconverged_kubevirt.io_KubeVirt" && en.Digest != "" && en.ResourceVersion != "" && en.Component == "virt"
			if en.Component == "" {
				t.Errorf("inventory entry %s has no component", en.ID)
			}
		}
		if !found {
			t.Errorf("inventory lacks the KubeVirt with digest, resourceVersion and component virt: %+v", s.Status.Inventory.Entries)
		}
		if len(s.Status.History) == 0 || s.Status.History[0].Revision != s.Status.LastAppliedRevision ||
			!strings.HasPrefix(s.Status.History[0].Digest, "sha256:") || s.Status.History[0].LastReconciledStatus != v1alpha1.SucceededReason {
			t.Errorf("history %+v", s.Status.History)
		}
		// The first reconcile creates everything and waits for the
		// operands' health (Progressing), a later one finds them healthy.
		ev := e.events(t, local.Name)
		var all []string
		for _, m := range ev {
			all = append(all, m...)
		}
		if len(ev[v1alpha1.SucceededReason]) == 0 || !strings.Contains(strings.Join(all, "\n"), "KubeVirt/kubevirt-hyperconverged/kubevirt-kubevirt-hyperconverged created") {
			t.Errorf("events %v, want %s and one listing the KubeVirt created", ev, v1alpha1.SucceededReason)
		}
		lbl := map[string]string{"namespace": e.ns, "name": local.Name}
		if n := e.metric(t, "converge_objects_applied_total", lbl); n < 10 {
			t.Errorf("converge_objects_applied_total = %v", n)
		}
		if n := e.metric(t, "converge_reconcile_duration_seconds", lbl); n < 1 {
			t.Errorf("converge_reconcile_duration_seconds count = %v", n)
		}
		if n := e.metric(t, "converge_last_applied_revision_info", map[string]string{"name": local.Name, "revision": s.Status.LastAppliedRevision}); n != 1 {
			t.Errorf("converge_last_applied_revision_info = %v", n)
		}
	})

	t.Run("new commit, broken commit, reconcile request", func(t *testing.T) {
		before, _ := e.wait(t, local, time.Minute, "Ready", ready)
		lbl := map[string]string{"namespace": e.ns, "name": local.Name}
		reconciles := e.settled(t, "converge_reconcile_duration_seconds", lbl)
		errs := e.metric(t, "controller_runtime_reconcile_errors_total", nil)
		written := e.statuses(t, local)
		rev := e.commit(t, "six migrations", "parallelMigrationsPerCluster: 5", "parallelMigrationsPerCluster: 6")
		req := e.request(t, local)
		s, d := e.wait(t, local, time.Minute, "new revision applied", readyAt(rev))
		t.Logf("new commit applied %s after the reconcile request", d)
		// The Progressing status, patched while the revision renders, is
		// written before the apply changes the KubeVirt (resourceVersions
		// of one etcd compared).
		var progressRV string
		for _, w := range written() {
			if c := condition(w, v1alpha1.ReadyCondition); c.Reason == v1alpha1.ProgressingReason && strings.Contains(c.Message, "Applying revision "+rev) {
				progressRV = w.ResourceVersion
				break
			}
		}
		kvApplied, err := get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.ParseInt(progressRV, 10, 64)
		if k, _ := strconv.ParseInt(kvApplied.GetResourceVersion(), 10, 64); progressRV == "" || p >= k {
			t.Errorf("Progressing status of %s at resourceVersion %q, want one before the KubeVirt's %s", rev, progressRV, kvApplied.GetResourceVersion())
		}
		// The apply patches the HyperConverged and the KubeVirt, whose
		// watch events are converge's own writes, not drift: one commit,
		// one reconcile.
		if n := e.settled(t, "converge_reconcile_duration_seconds", lbl) - reconciles; n != 1 {
			t.Errorf("%v reconciles for one commit, want 1", n)
		}
		// A reconcile whose status patch fails records no duration but
		// an error, and is retried.
		if n := e.metric(t, "controller_runtime_reconcile_errors_total", nil) - errs; n != 0 {
			t.Errorf("%v reconcile errors for one commit, want 0", n)
		}
		if s.Status.LastHandledReconcileAt != req {
			t.Errorf("lastHandledReconcileAt %q, want %q", s.Status.LastHandledReconcileAt, req)
		}
		kv, err := get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey)
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedInt64(kv.Object, "spec", "configuration", "migrations", "parallelMigrationsPerCluster"); v != 6 {
			t.Errorf("KubeVirt parallelMigrationsPerCluster = %d, want 6", v)
		}
		if len(s.Status.History) < 2 || s.Status.History[0].Revision != rev || s.Status.History[1].Revision != before.Status.LastAppliedRevision {
			t.Errorf("history %+v, want %s then %s", s.Status.History, rev, before.Status.LastAppliedRevision)
		}

		good := s
		bad := e.commit(t, "broken", "uninstallStrategy: BlockUninstallIfWorkloadsExist", "uninstallStrategy: Nope")
		e.request(t, local)
		s, _ = e.wait(t, local, time.Minute, "RenderFailed", func(s *v1alpha1.Sync) bool {
			return s.Status.LastAttemptedRevision == bad && condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.RenderFailedReason
		})
		if c := condition(s, v1alpha1.ReadyCondition); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "uninstallStrategy") {
			t.Errorf("Ready = %+v, want False naming uninstallStrategy", c)
		}
		if c := condition(s, v1alpha1.StalledCondition); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.RenderFailedReason {
			t.Errorf("Stalled = %+v, want True RenderFailed", c)
		}
		if s.Status.LastAppliedRevision != rev {
			t.Errorf("lastAppliedRevision %q after a broken commit, want %q kept", s.Status.LastAppliedRevision, rev)
		}
		if len(s.Status.Inventory.Entries) != len(good.Status.Inventory.Entries) {
			t.Errorf("inventory has %d entries after a broken commit, want %d kept", len(s.Status.Inventory.Entries), len(good.Status.Inventory.Entries))
		}
		if kv, err := get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey); err != nil || !strings.Contains(mustJSON(kv.Object), "BlockUninstallIfWorkloadsExist") {
			t.Errorf("KubeVirt changed by a broken commit (err %v)", err)
		}
		if len(e.events(t, local.Name)[v1alpha1.RenderFailedReason]) == 0 {
			t.Error("no RenderFailed event")
		}
		fixed := e.commit(t, "fixed", "uninstallStrategy: Nope", "uninstallStrategy: BlockUninstallIfWorkloadsExist")
		e.request(t, local)
		s, _ = e.wait(t, local, time.Minute, "Ready after the fix", readyAt(fixed))
		if c := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.StalledCondition); c != nil {
			t.Errorf("Stalled kept after the fix: %+v", c)
		}
	})

	t.Run("drift reverted, foreign field kept", func(t *testing.T) {
		e.wait(t, local, time.Minute, "Ready", ready)
		kv, err := get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey)
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(kv.Object, "RemoveWorkloads", "spec", "uninstallStrategy")
		l := kv.GetLabels()
		l["team"] = "storage"
		kv.SetLabels(l)
		start := time.Now()
		if err := e.c1.Update(context.Background(), kv, client.FieldOwner("someone-else")); err != nil {
			t.Fatal(err)
		}
		controlplane.Eventually(t, time.Minute, func() bool {
			kv, err := get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey)
			v, _, _ := unstructured.NestedString(kv.Object, "spec", "uninstallStrategy")
			return err == nil && v == "BlockUninstallIfWorkloadsExist"
		})
		t.Logf("drift reverted %s after the change (interval 1h)", time.Since(start))
		kv, _ = get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey)
		if kv.GetLabels()["team"] != "storage" {
			t.Errorf("foreign label lost: %v", kv.GetLabels())
		}
		controlplane.Eventually(t, 30*time.Second, func() bool {
			return len(e.events(t, local.Name)["DriftCorrected"]) > 0
		})
		if n := e.metric(t, "converge_drift_corrected_total", map[string]string{"name": local.Name, "kind": "KubeVirt"}); n < 1 {
			t.Errorf("converge_drift_corrected_total{kind=KubeVirt} = %v", n)
		}
	})

	// An operator's status update of an operand reaches the Sync, whose
	// components and HyperConverged status report it, through a status
	// refresh: no fetch, render or apply. A change to the operand's
	// metadata is a reconcile.
	t.Run("operand status refreshed, not reapplied", func(t *testing.T) {
		e.wait(t, local, time.Minute, "Ready", ready)
		lbl := map[string]string{"namespace": e.ns, "name": local.Name}
		reconciles := e.settled(t, "converge_reconcile_duration_seconds", lbl)
		refreshes := e.metric(t, "converge_status_refresh_duration_seconds", lbl)
		fetches := e.metric(t, "converge_fetch_duration_seconds", lbl)
		before := &v1alpha1.Sync{}
		if err := e.c1.Get(context.Background(), local, before); err != nil {
			t.Fatal(err)
		}
		hc, err := get(e.c1, "hco.kubevirt.io/v1", "HyperConverged", hcKey)
		if err != nil {
			t.Fatal(err)
		}
		hcDegraded := func(hc *unstructured.Unstructured) map[string]any {
			cs, _, _ := unstructured.NestedSlice(hc.Object, "status", "conditions")
			for _, c := range cs {
				if c := c.(map[string]any); c["type"] == "Degraded" {
					return c
				}
			}
			return nil
		}
		if c := hcDegraded(hc); c == nil || c["status"] != "False" {
			t.Fatalf("HyperConverged Degraded %v before the KubeVirt is, want False", c)
		}
		kv, err := get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey)
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.Now().Rfc3339Copy().Format(time.RFC3339)
		conds := []any{}
		for _, c := range [][2]string{{"Available", "False"}, {"Progressing", "False"}, {"Degraded", "True"}} {
			conds = append(conds, map[string]any{"type": c[0], "status": c[1], "reason": "HandlerDown", "message": "virt-handler is down", "lastTransitionTime": now})
		}
		kv.Object["status"] = map[string]any{"conditions": conds, "observedGeneration": kv.GetGeneration(), "phase": "Deployed"}
		if err := e.c1.Status().Update(context.Background(), kv, client.FieldOwner("virt-operator")); err != nil {
			t.Fatal(err)
		}
		s, _ := e.wait(t, local, time.Minute, "virt Failed", func(s *v1alpha1.Sync) bool {
			for _, c := range s.Status.Components {
				if c.Name == "virt" {
					return c.Health == "Failed" && strings.Contains(c.Message, "virt-handler is down")
				}
			}
			return false
		})
		if n := e.settled(t, "converge_reconcile_duration_seconds", lbl) - reconciles; n != 0 {
			t.Errorf("%v reconciles for an operator's status update, want 0", n)
		}
		if n := e.metric(t, "converge_status_refresh_duration_seconds", lbl) - refreshes; n < 1 {
			t.Errorf("%v status refreshes for an operator's status update, want at least 1", n)
		}
		if n := e.metric(t, "converge_fetch_duration_seconds", lbl) - fetches; n != 0 {
			t.Errorf("%v fetches for an operator's status update, want 0", n)
		}
		if s.Status.History[0].TotalReconciliations != before.Status.History[0].TotalReconciliations {
			t.Errorf("history %+v after a status refresh, want %+v (a refresh reconciles no revision)", s.Status.History[0], before.Status.History[0])
		}
		// The HyperConverged's status aggregates the KubeVirt's, as HCO
		// reports its operands: the refresh wrote it.
		if hc, err = get(e.c1, "hco.kubevirt.io/v1", "HyperConverged", hcKey); err != nil {
			t.Fatal(err)
		}
		if c := hcDegraded(hc); c == nil || c["status"] != "True" || c["reason"] != "KubeVirtDegraded" || !strings.Contains(fmt.Sprint(c["message"]), "virt-handler is down") {
			t.Errorf("HyperConverged Degraded %v, want True KubeVirtDegraded with the KubeVirt's message", c)
		}

		// A label is metadata, not status: a reconcile (which re-applies
		// nothing: converge does not own that label).
		reconciles = e.settled(t, "converge_reconcile_duration_seconds", lbl)
		if kv, err = get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey); err != nil {
			t.Fatal(err)
		}
		l := kv.GetLabels()
		l["cost-center"] = "42"
		kv.SetLabels(l)
		if err := e.c1.Update(context.Background(), kv, client.FieldOwner("someone-else")); err != nil {
			t.Fatal(err)
		}
		if n := e.settled(t, "converge_reconcile_duration_seconds", lbl) - reconciles; n != 1 {
			t.Errorf("%v reconciles for a label added to an applied object, want 1", n)
		}
	})

	// spec.operators external derives the operands converge has no
	// native operator for (MigController, FileRestoreOperator); back to
	// native, they leave the graph and are pruned.
	t.Run("operators mode and prune", func(t *testing.T) {
		e.wait(t, local, time.Minute, "Ready", ready)
		e.patchSync(t, local, `{"spec":{"operators":"external"}}`)
		s, _ := e.wait(t, local, time.Minute, "external mode applied", ready)
		mig := entry(s, "_migrations.kubevirt.io_MigController")
		if mig == "" {
			t.Fatalf("no MigController in the inventory in external mode: %+v", s.Status.Inventory.Entries)
		}
		kv, err := get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey)
		if err != nil || kv.GetAnnotations()["converge.dev/operator"] != "external" {
			t.Errorf("KubeVirt in external mode: annotations %v (%v), want converge.dev/operator: external", kv.GetAnnotations(), err)
		}
		e.patchSync(t, local, `{"spec":{"operators":null}}`)
		s, _ = e.wait(t, local, time.Minute, "native mode applied", ready)
		if entry(s, "_migrations.kubevirt.io_MigController") != "" {
			t.Errorf("MigController still in the inventory")
		}
		parts := strings.Split(mig, "_")
		if _, err := get(e.c1, "migrations.kubevirt.io/v1alpha1", "MigController", types.NamespacedName{Namespace: parts[0], Name: parts[1]}); !absent(err) {
			t.Errorf("MigController still in the cluster: %v", err)
		}
		msgs := strings.Join(e.events(t, local.Name)[v1alpha1.SucceededReason], "\n")
		if !strings.Contains(msgs, "MigController/") || !strings.Contains(msgs, " deleted") {
			t.Errorf("no event lists the MigController deleted:\n%s", msgs)
		}
	})

	// The receiver: without its Secret the Sync says so and has no hook
	// path; once the Secret appears (it is watched) the Sync publishes its
	// path (a digest of the token), a signed push there applies a commit
	// at once, a rotated token moves the path, and without spec.receiver
	// no path is served.
	t.Run("receiver", func(t *testing.T) {
		e.patchSync(t, local, `{"spec":{"receiver":{"secretRef":{"name":"hook"}}}}`)
		controlplane.Eventually(t, time.Minute, func() bool {
			for _, m := range e.events(t, local.Name)[synccontroller.ReceiverFailedReason] {
				if strings.Contains(m, "Secret converge/hook (spec.receiver.secretRef): secrets \"hook\" not found") {
					return true
				}
			}
			return false
		})
		if s, _ := e.wait(t, local, time.Minute, "Ready", ready); s.Status.WebhookPath != "" {
			t.Errorf("status.webhookPath %q without the receiver's Secret", s.Status.WebhookPath)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "hook"}, Data: map[string][]byte{"token": []byte("hook-token")}}
		e.create(t, e.c1, secret)
		first := receiver.Path(local, []byte("hook-token"))
		e.wait(t, local, time.Minute, "Ready with status.webhookPath", func(s *v1alpha1.Sync) bool { return ready(s) && s.Status.WebhookPath == first })
		srv := httptest.NewServer(&receiver.Handler{Index: e.hooks, Reader: e.c1, Trigger: e.rec.Trigger})
		defer srv.Close()
		post := func(path, token, sha string) int {
			t.Helper()
			resp, err := http.DefaultClient.Do(gitserver.GitHubPush(t, srv.URL+path, token, "main", sha))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}

		rev := e.commit(t, "seven migrations", "parallelMigrationsPerCluster: 6", "parallelMigrationsPerCluster: 7")
		sha := strings.TrimPrefix(rev, "main@sha1:")
		if code := post("/hook/"+local.Namespace+"/"+local.Name, "hook-token", sha); code != http.StatusNotFound {
			t.Errorf("the former path /hook/<namespace>/<name> answered %d, want 404", code)
		}
		start := time.Now()
		if code := post(first, "hook-token", sha); code != http.StatusOK {
			t.Fatalf("receiver answered %d at status.webhookPath", code)
		}
		e.wait(t, local, time.Minute, "pushed revision applied", readyAt(rev))
		t.Logf("pushed commit applied %s after the webhook (interval 1h)", time.Since(start))

		// A new token (the Secret is watched) moves the path; the old
		// path and the old token are refused from then on.
		secret.Data["token"] = []byte("hook-token-2")
		if err := e.c1.Update(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		second := receiver.Path(local, []byte("hook-token-2"))
		e.wait(t, local, time.Minute, "status.webhookPath of the new token", func(s *v1alpha1.Sync) bool { return s.Status.WebhookPath == second })
		for _, tc := range []struct {
			name, path, token string
			want              int
		}{
			{"old path, old token", first, "hook-token", http.StatusNotFound},
			{"new path, old token", second, "hook-token", http.StatusNotFound},
			{"new path, new token", second, "hook-token-2", http.StatusOK},
		} {
			if code := post(tc.path, tc.token, sha); code != tc.want {
				t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
			}
		}

		e.patchSync(t, local, `{"spec":{"receiver":null}}`)
		e.wait(t, local, time.Minute, "no status.webhookPath", func(s *v1alpha1.Sync) bool {
			return s.Status.ObservedGeneration == s.Generation && s.Status.WebhookPath == ""
		})
		if code := post(second, "hook-token-2", sha); code != http.StatusNotFound {
			t.Errorf("without spec.receiver the path answered %d, want 404", code)
		}
	})

	t.Run("suspend", func(t *testing.T) {
		before, _ := e.wait(t, local, time.Minute, "Ready", ready)
		e.patchSync(t, local, `{"spec":{"suspend":true}}`)
		e.wait(t, local, time.Minute, "Suspended", func(s *v1alpha1.Sync) bool {
			return s.Status.ObservedGeneration == s.Generation && condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.SuspendedReason
		})
		rev := e.commit(t, "eight migrations", "parallelMigrationsPerCluster: 7", "parallelMigrationsPerCluster: 8")
		req := e.request(t, local)
		s, _ := e.wait(t, local, time.Minute, "request handled", func(s *v1alpha1.Sync) bool { return s.Status.LastHandledReconcileAt == req })
		if s.Status.LastAppliedRevision != before.Status.LastAppliedRevision || s.Status.LastAttemptedRevision != before.Status.LastAttemptedRevision {
			t.Errorf("suspended Sync moved: applied %q attempted %q, want %q", s.Status.LastAppliedRevision, s.Status.LastAttemptedRevision, before.Status.LastAppliedRevision)
		}
		if c := condition(s, v1alpha1.ReadyCondition); c.Status != metav1.ConditionTrue {
			t.Errorf("Ready %+v while suspended, want its last status (True) kept", c)
		}
		if n := e.metric(t, "converge_sync_suspended", map[string]string{"name": local.Name}); n != 1 {
			t.Errorf("converge_sync_suspended = %v", n)
		}
		e.patchSync(t, local, `{"spec":{"suspend":false}}`)
		e.wait(t, local, time.Minute, "applied after resume", readyAt(rev))
	})

	t.Run("impersonation", func(t *testing.T) {
		key := e.sync(t, "deployer", func(s *v1alpha1.Sync) {
			s.Spec.Target = &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: "cluster2"}}}
			s.Spec.ServiceAccountName = "deployer"
		})
		s, _ := e.wait(t, key, time.Minute, "ApplyFailed", func(s *v1alpha1.Sync) bool {
			return condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.ApplyFailedReason
		})
		c := condition(s, v1alpha1.ReadyCondition)
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "forbidden") || !strings.Contains(c.Message, "system:serviceaccount:converge:deployer") {
			t.Errorf("Ready = %+v, want False, forbidden for system:serviceaccount:converge:deployer", c)
		}
		e.create(t, e.c2, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "deployer"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: e.ns, Name: "deployer"}},
		})
		e.request(t, key)
		e.wait(t, key, time.Minute, "Ready with RBAC", readyAt(e.head(t)))
		e.deleteSync(t, key, v1alpha1.DeletionPolicyOrphan)
	})

	// A missing or malformed kubeconfig stalls the Sync; a target that
	// became unreachable (the Secret now points at a closed port: the
	// target is rebuilt from the new Secret version) keeps the finalizer
	// with DeletionFailed until deletionPolicy is set to Orphan.
	t.Run("target errors and unreachable target on delete", func(t *testing.T) {
		for _, tc := range []struct{ name, secret string }{{"missing", "no-such-secret"}, {"malformed", "bad-kubeconfig"}} {
			e.create(t, e.c1, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "bad-kubeconfig"},
				Data: map[string][]byte{"value": []byte("clusters: [")}})
			key := e.sync(t, "target-"+tc.name, func(s *v1alpha1.Sync) {
				s.Spec.Target = &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: tc.secret}}}
			})
			s, _ := e.wait(t, key, time.Minute, "TargetFailed", func(s *v1alpha1.Sync) bool {
				return condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.TargetFailedReason
			})
			if c := condition(s, v1alpha1.StalledCondition); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, tc.secret) {
				t.Errorf("%s: Stalled = %+v, want True naming the Secret", tc.name, c)
			}
			e.deleteSync(t, key, v1alpha1.DeletionPolicyDelete) // nothing applied: nothing to delete
		}

		e.create(t, e.c1, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cluster2-copy"},
			Data: map[string][]byte{"value": e.kubeconfig2}})
		key := e.sync(t, "doomed", func(s *v1alpha1.Sync) {
			s.Spec.Target = &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: "cluster2-copy"}}}
			s.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Second}
		})
		e.wait(t, key, time.Minute, "Ready", readyAt(e.head(t)))
		dead := regexp.MustCompile(`server: https://[^\s]+`).ReplaceAll(e.kubeconfig2,
			[]byte(fmt.Sprintf("server: https://127.0.0.1:%d", controlplane.FreePort(t))))
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cluster2-copy"}, Data: map[string][]byte{"value": dead}}
		if err := e.c1.Update(context.Background(), sec); err != nil {
			t.Fatal(err)
		}
		if err := e.c1.Delete(context.Background(), &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: key.Name}}); err != nil {
			t.Fatal(err)
		}
		s, _ := e.wait(t, key, time.Minute, "DeletionFailed", func(s *v1alpha1.Sync) bool {
			return condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.DeletionFailedReason
		})
		if c := condition(s, v1alpha1.ReadyCondition); !strings.Contains(c.Message, "deletionPolicy: Orphan") || !slices.Contains(s.Finalizers, v1alpha1.Finalizer) {
			t.Errorf("Ready = %+v, finalizers %v: want the escape hatch named and the finalizer kept", c, s.Finalizers)
		}
		e.deleteSync(t, key, v1alpha1.DeletionPolicyOrphan)
		if _, err := get(e.c2, "kubevirt.io/v1", "KubeVirt", kvKey); err != nil {
			t.Errorf("KubeVirt in cluster 2 after the Orphan escape hatch: %v", err)
		}
	})

	// Sources: signatures and credentials, each Sync into cluster 2 and
	// orphaned.
	t.Run("signature verification", func(t *testing.T) { testVerification(t, e) })
	t.Run("authentication", func(t *testing.T) { testAuth(t, e) })

	// Every remote Sync so far was deleted: only the local target runs. A
	// Sync moving from one kubeconfig Secret to another stops the first
	// target; deleting it stops the second.
	t.Run("target caches stop with their last Sync", func(t *testing.T) {
		localOnly := []string{"the local cluster"}
		cluster2 := `kubeconfig Secret converge/cluster2 key "value"`
		again := `kubeconfig Secret converge/cluster2-again key "value"`
		// The targets are released after the finalizer is removed, a moment
		// after the Sync is gone: poll.
		targets := func(what string, want []string) {
			t.Helper()
			start := time.Now()
			for !slices.Equal(e.rec.Targets(), want) {
				if time.Since(start) > 10*time.Second {
					t.Errorf("targets %q %s, want %q", e.rec.Targets(), what, want)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		targets("after every remote Sync was deleted", localOnly)
		key := e.sync(t, "mover", toCluster2)
		e.wait(t, key, time.Minute, "Ready in cluster 2", readyAt(e.head(t)))
		targets("with a Sync in cluster 2", []string{cluster2, "the local cluster"})
		e.create(t, e.c1, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cluster2-again"},
			Data: map[string][]byte{"value": e.kubeconfig2}})
		e.patchSync(t, key, `{"spec":{"target":{"kubeConfig":{"secretRef":{"name":"cluster2-again"}}}}}`)
		e.wait(t, key, time.Minute, "Ready through the other Secret", readyAt(e.head(t)))
		targets("after the Sync moved to another kubeconfig Secret", []string{again, "the local cluster"})
		e.deleteSync(t, key, v1alpha1.DeletionPolicyOrphan)
		targets("after deleting the Sync", localOnly)
	})

	// VMs from Git: a commit adds workloads beside the HyperConverged; the
	// fields KubeVirt's and CDI's controllers write are not drift; a commit
	// removing the VM prunes it. Leaves "local" Ready with no workloads
	// (the Namespace "vms" terminating: no namespace controller runs).
	t.Run("workloads", func(t *testing.T) { testWorkloads(t, e, local) })

	// Last: deletes everything "local" applied in cluster 1.
	t.Run("deletion policy Delete", func(t *testing.T) {
		e.wait(t, local, time.Minute, "Ready", ready)
		e.deleteSync(t, local, v1alpha1.DeletionPolicyDelete)
		if _, err := get(e.c1, "kubevirt.io/v1", "KubeVirt", kvKey); !absent(err) {
			t.Errorf("KubeVirt kept after deleting the Sync with policy Delete: %v", err)
		}
		if _, err := get(e.c1, "hco.kubevirt.io/v1", "HyperConverged", hcKey); !absent(err) {
			t.Errorf("HyperConverged kept after deleting the Sync with policy Delete: %v", err)
		}
		if n := e.metric(t, "converge_last_applied_revision_info", map[string]string{"name": local.Name}); n != 0 {
			t.Errorf("metrics of the deleted Sync kept: converge_last_applied_revision_info = %v", n)
		}
	})
}

// entry gives the ID of the inventory entry ending in suffix ("" if none).
func entry(s *v1alpha1.Sync, suffix string) string {
	for _, en := range s.Status.Inventory.Entries {
		if strings.HasSuffix(en.ID, suffix) {
			return en.ID
		}
	}
	return ""
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
