package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	e2ecluster "github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/gitserver"
)

// BenchmarkInstall measures `converge install` on the machine's real
// cluster (internal/e2e/cluster: the CLI, converge-controller and
// converge-node built with one version, their images built and imported
// into containerd), from a cluster without converge each iteration (the
// uninstall between iterations is not timed), next to a floor measured in
// the same run:
//
//   - apply-floor: the objects `converge render --controller` prints (the
//     same bundle), applied in-process with fluxcd/pkg/ssa ApplyAllStaged
//     and waited for with WaitForSet polling every 100 ms until the
//     Deployment is Current: the part no CLI can shorten (the API server,
//     the scheduler, the kubelet starting the image, the controller's
//     readiness probe). Reported: median-ms and min-ms.
//   - converge-install: the built CLI, `converge install` (it applies the
//     bundle and waits for the Deployment, polling every 2 s), until it
//     exits. Reported: median-ms, min-ms and their ratios to
//     apply-floor's, x-floor and min-x-floor.
//   - sync-ready: `converge install --sync-url` of the example served
//     by a Git server on the node address, until the Sync is Ready at the
//     revision: converge's native operators ran every role (the VM
//     agent with libvirtd, bridge-marker, the cdi-importer, the hostpath
//     CSI driver) and each operand CR is Available because their pods are
//     ready, so every health gate opened. Reported as converge-install
//     (its ratio is to the controller's bundle alone: what the whole
//     stack costs over installing converge).
//
// It needs what the e2e tests need (root, containerd, runc, bin/, apt and
// libvirt-dev for the images) and skips otherwise.
func BenchmarkInstall(b *testing.B) {
	e := e2ecluster.StartForBench(b)
	ctx := context.Background()
	r := e.Converge(ctx, "render", "--controller", "-o", "json")
	if r.Err != nil {
		b.Fatal(r)
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		b.Fatalf("converge render --controller -o json: %v", err)
	}
	var bundle []*unstructured.Unstructured
	for _, it := range list.Items {
		bundle = append(bundle, &unstructured.Unstructured{Object: it})
	}

	var floor stats
	b.Run("apply-floor", func(b *testing.B) {
		m := ssa.NewResourceManager(e.Client, polling.NewStatusPoller(e.Client, e.Client.RESTMapper(), polling.Options{}),
			ssa.Owner{Field: "bench", Group: v1alpha1.Group})
		var ds []time.Duration
		for b.Loop() {
			objs := make([]*unstructured.Unstructured, len(bundle))
			for i, o := range bundle {
				objs[i] = o.DeepCopy()
			}
			start := time.Now()
			if _, err := m.ApplyAllStaged(ctx, objs, ssa.DefaultApplyOptions()); err != nil {
				b.Fatal(err)
			}
			var deploy []*unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == "Deployment" {
					deploy = append(deploy, o)
				}
			}
			if err := m.WaitForSetWithContext(ctx, object.UnstructuredSetToObjMetadataSet(deploy),
				ssa.WaitOptions{Interval: 100 * time.Millisecond, Timeout: 3 * time.Minute}); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			b.StopTimer()
			logTimeline(b, e, start)
			uninstall(b, e, bundle)
			b.StartTimer()
		}
		floor = report(b, ds, stats{})
	})
	b.Run("converge-install", func(b *testing.B) {
		var ds []time.Duration
		for b.Loop() {
			r := e.Converge(ctx, "install", "--timeout", "3m")
			if r.Err != nil {
				b.Fatal(r)
			}
			ds = append(ds, r.Took)
			b.StopTimer()
			logTimeline(b, e, time.Now().Add(-r.Took))
			uninstall(b, e, bundle)
			b.StartTimer()
		}
		report(b, ds, floor)
	})
	b.Run("sync-ready", func(b *testing.B) {
		repo := exampleRepo(b)
		srv := gitserver.NewHTTP(b, filepath.Dir(repo.Dir), gitserver.HTTPOptions{Addr: localcluster.NodeIP + ":0"})
		sha := gitserver.Git(b, repo.Dir, "rev-parse", "HEAD")
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			r := e.Converge(ctx, "install", "--sync-url", srv.RepoURL(repo), "--timeout", "3m")
			if r.Err != nil {
				b.Fatal(r)
			}
			waitSyncReady(b, e, "main@sha1:"+sha)
			ds = append(ds, time.Since(start))
			b.StopTimer()
			logTimeline(b, e, start)
			uninstall(b, e, bundle)
			b.StartTimer()
		}
		report(b, ds, floor)
	})
}

// logTimeline logs when, after start, the controller's pod was created,
// its container started and it turned Ready (the API server's
// timestamps have a second's resolution).
func logTimeline(b *testing.B, e *e2ecluster.Env, start time.Time) {
	b.Helper()
	var pods corev1.PodList
	if err := e.Client.List(context.Background(), &pods, client.InNamespace("converge-system")); err != nil || len(pods.Items) == 0 {
		b.Logf("no controller pod: %v", err)
		return
	}
	p := pods.Items[0]
	at := func(t time.Time) string { return t.Sub(start).Round(100 * time.Millisecond).String() }
	line := "pod created +" + at(p.CreationTimestamp.Time)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			line += ", started +" + at(cs.State.Running.StartedAt.Time)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			line += ", Ready +" + at(c.LastTransitionTime.Time)
		}
	}
	b.Log(line)
}

// report reports the median (median-ms) and the shortest (min-ms) of
// ds and, when floor has them, their ratios to the floor's (x-floor,
// min-x-floor), and gives ds's. The pod's readiness probe (every 10 s)
// makes a run take either about as long as the controller's start or
// 10 s more, so with a few runs the minimum says more than the median.
func report(b *testing.B, ds []time.Duration, floor stats) stats {
	if len(ds) == 0 {
		return stats{}
	}
	st := stats{median: reportMedian(b, ds), min: slices.Min(ds)}
	b.ReportMetric(float64(st.min)/float64(time.Millisecond), "min-ms")
	if floor.median > 0 {
		b.ReportMetric(float64(st.median)/float64(floor.median), "x-floor")
		b.ReportMetric(float64(st.min)/float64(floor.min), "min-x-floor")
	}
	return st
}

// stats are the median and the minimum of a sub-benchmark's runs.
type stats struct{ median, min time.Duration }

// waitSyncReady polls the Sync converge-system/converge every 50 ms
// until it is Ready at revision.
func waitSyncReady(b *testing.B, e *e2ecluster.Env, revision string) {
	b.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		s := &v1alpha1.Sync{}
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: "converge-system", Name: "converge"}, s)
		if err == nil && s.Status.LastAppliedRevision == revision && apimeta.IsStatusConditionTrue(s.Status.Conditions, "Ready") {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("Sync converge-system/converge: not Ready at %s within 5m (%v, %+v, components %+v)", revision, err, s.Status.Conditions, s.Status.Components)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// uninstall removes converge from the cluster: the Syncs first (their
// finalizer makes the running controller delete what they applied, and
// its native operators remove their roles; the HyperConverged's
// namespace, where those roles run, is awaited gone), then
// the bundle's objects, the webhook configurations the controller
// registered, and waits until the controller's namespace is gone.
func uninstall(b *testing.B, e *e2ecluster.Env, bundle []*unstructured.Unstructured) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var syncs v1alpha1.SyncList
	if err := e.Client.List(ctx, &syncs); err != nil && !apimeta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	for i := range syncs.Items {
		if err := e.Client.Delete(ctx, &syncs.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			b.Fatal(err)
		}
	}
	for i := range syncs.Items {
		waitGone(b, ctx, e, &syncs.Items[i])
	}
	waitGone(b, ctx, e, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-hyperconverged"}})
	for i := len(bundle) - 1; i >= 0; i-- {
		if err := e.Client.Delete(ctx, bundle[i].DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			b.Fatalf("deleting %s %s: %v", bundle[i].GetKind(), bundle[i].GetName(), err)
		}
	}
	if err := e.Client.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}); err != nil {
		b.Fatal(err)
	}
	if err := e.Client.DeleteAllOf(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{}); err != nil {
		b.Fatal(err)
	}
	for _, o := range bundle {
		if o.GetKind() == "Namespace" {
			waitGone(b, ctx, e, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetName()}})
		}
	}
}

// waitGone polls until o no longer exists.
func waitGone(b *testing.B, ctx context.Context, e *e2ecluster.Env, o client.Object) {
	b.Helper()
	for {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("%T %s still exists: %v", o, client.ObjectKeyFromObject(o), fmt.Sprint(err))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
