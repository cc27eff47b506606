package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/source"
	"github.com/converge-dev/converge/gitops/synccontroller"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/gitserver"
	"github.com/converge-dev/converge/reconciler"
)

const (
	syncNS               = "converge"
	gitUser, gitPassword = "converge", "s3cret"
	gitSecret            = "git-auth"
	retryInterval        = 2 * time.Second
)

// syncEnv is converge-controller's Sync controller (in-process, in a
// manager of its own) on a world, a real Git server (git http-backend,
// basic auth) holding round 0's config, and one Sync of it.
type syncEnv struct {
	w    *world
	repo *gitserver.Repo
	git  *gitserver.HTTP
	key  types.NamespacedName

	mu     sync.Mutex
	synced map[string][]error // Pipeline.Sync outcomes by revision (OnSynced)
}

// startSync starts the controller and creates the Sync (interval 1h: it
// reconciles when asked; spec.wait false: no operator runs here, so
// nothing would turn healthy), then waits until it is Ready at round 0.
func startSync(t *testing.T, w *world) *syncEnv {
	t.Helper()
	ctx := context.Background()
	e, err := engine()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := e.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	must(t, w.c.Patch(ctx, crd, client.Apply, client.FieldOwner("test"), client.ForceOwnership))
	controlplane.Eventually(t, 30*time.Second, func() bool { return w.c.List(ctx, &v1alpha1.SyncList{}) == nil })
	must(t, w.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: syncNS}}))
	must(t, w.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: syncNS, Name: gitSecret},
		Data: map[string][]byte{"username": []byte(gitUser), "password": []byte(gitPassword)}}))

	s := &syncEnv{w: w, key: types.NamespacedName{Namespace: syncNS, Name: "example"}, synced: map[string][]error{}}
	root := t.TempDir()
	s.repo = gitserver.NewRepo(t, root, "config", "main")
	s.commit(t, 0)
	s.git = gitserver.NewHTTP(t, root, gitserver.HTTPOptions{Username: gitUser, Password: gitPassword})

	skip := true // each test of the package runs a controller named "sync"
	mgr, err := ctrl.NewManager(w.env.Config, ctrl.Options{Scheme: w.scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip}})
	if err != nil {
		t.Fatal(err)
	}
	opts := synccontroller.DefaultOptions()
	opts.RetryInterval, opts.HealthRequeue, opts.DependencyRequeue = retryInterval, retryInterval, retryInterval
	rec := &synccontroller.Reconciler{Engine: e, Fetcher: source.NewFetcher(source.Options{CacheDir: t.TempDir()}), Options: opts,
		OnSynced: func(sy *v1alpha1.Sync, _ *reconciler.Result, err error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			rev := sy.Status.LastAttemptedRevision
			s.synced[rev] = append(s.synced[rev], err)
		}}
	must(t, rec.SetupWithManager(mgr))
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	must(t, w.c.Create(ctx, &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.key.Namespace, Name: s.key.Name},
		Spec: v1alpha1.SyncSpec{
			Source: v1alpha1.GitSource{URL: s.git.RepoURL(s.repo), Ref: &v1alpha1.GitRef{Branch: "main"},
				SecretRef: &v1alpha1.LocalObjectReference{Name: gitSecret}},
			Interval: metav1.Duration{Duration: time.Hour},
			Wait:     new(bool),
		},
	}))
	s.wait(t, 2*time.Minute, "Ready at round 0", s.readyAt(s.head(t)))
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// commit commits round r's config and gives the revision the Sync reports.
func (s *syncEnv) commit(t *testing.T, r int) string {
	t.Helper()
	files := exampleFiles(t)
	files["workloads.yaml"] = workloads(r)
	return "main@sha1:" + s.repo.Commit(t, fmt.Sprintf("round %d", r), files)
}

func (s *syncEnv) head(t *testing.T) string {
	return "main@sha1:" + gitserver.Git(t, s.repo.Dir, "rev-parse", "HEAD")
}

// request asks for a reconcile (the reconcile request annotation, as
// `converge reconcile` and the push receiver set it), retrying while the
// API server does not answer, and gives the value.
func (s *syncEnv) request(t *testing.T) string {
	t.Helper()
	v := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, v)
	sy := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: s.key.Namespace, Name: s.key.Name}}
	deadline := time.Now().Add(time.Minute)
	for {
		err := s.w.c.Patch(context.Background(), sy, client.RawPatch(types.MergePatchType, []byte(patch)))
		if err == nil {
			return v
		}
		if time.Now().After(deadline) || !isUnavailable(err) {
			t.Fatalf("requesting a reconcile of Sync %s: %v", s.key, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get reads the Sync.
func (s *syncEnv) get() (*v1alpha1.Sync, error) {
	sy := &v1alpha1.Sync{}
	return sy, s.w.c.Get(context.Background(), s.key, sy)
}

// wait polls the Sync until cond holds, failing with its status when it
// does not within timeout (a bound against hangs); it gives the Sync.
func (s *syncEnv) wait(t *testing.T, timeout time.Duration, what string, cond func(*v1alpha1.Sync) bool) *v1alpha1.Sync {
	t.Helper()
	start := time.Now()
	for {
		sy, err := s.get()
		if err == nil && cond(sy) {
			return sy
		}
		if err != nil && !isUnavailable(err) && !apierrors.IsNotFound(err) {
			t.Fatalf("reading Sync %s: %v", s.key, err)
		}
		if time.Since(start) > timeout {
			b, _ := json.MarshalIndent(sy.Status.Conditions, "", "  ")
			t.Fatalf("Sync %s: %s not reached within %s (get: %v); lastApplied=%q lastAttempted=%q conditions:\n%s",
				s.key, what, timeout, err, sy.Status.LastAppliedRevision, sy.Status.LastAttemptedRevision, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *syncEnv) readyAt(rev string) func(*v1alpha1.Sync) bool {
	return func(sy *v1alpha1.Sync) bool {
		return sy.Generation == sy.Status.ObservedGeneration && sy.Status.LastAppliedRevision == rev &&
			apimeta.IsStatusConditionTrue(sy.Status.Conditions, v1alpha1.ReadyCondition)
	}
}

// outcomes gives the Pipeline.Sync results of rev so far.
func (s *syncEnv) outcomes(rev string) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.synced[rev]...)
}
