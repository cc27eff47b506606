package synccontroller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/metrics"
	"github.com/converge-dev/converge/gitops/receiver"
	"github.com/converge-dev/converge/gitops/source"
	"github.com/converge-dev/converge/gitops/synccontroller"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/gitserver"
)

// testEnv is what every subtest of TestSync shares: two real API servers
// (cluster 1 runs the controller, cluster 2 is a remote target), a real
// Git server with basic auth holding testdata/example, and one manager
// running the Reconciler against cluster 1.
type testEnv struct {
	c1, c2      client.Client
	w1          client.WithWatch // watches cluster 1
	kubeconfig2 []byte
	repo        *gitserver.Repo
	git         *gitserver.HTTP
	rec         *synccontroller.Reconciler
	hooks       *receiver.Index // the Reconciler's Receivers
	reg         *prometheus.Registry
	ns          string
}

const (
	gitUser, gitPassword = "converge", "s3cret"
	authSecret           = "git-auth"
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// startEnv starts everything; it is stopped in t's cleanup.
func startEnv(t *testing.T) *testEnv { return startEnvWith(t, nil) }

// startEnvWith is startEnv with the controller's options changed by
// tune (nil keeps the defaults the tests use).
func startEnvWith(t *testing.T, tune func(*synccontroller.Options)) *testEnv {
	t.Helper()
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) {
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	log.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	var cps [2]*controlplane.Env
	var errs [2]error
	var wg sync.WaitGroup
	for i := range cps {
		wg.Add(1)
		go func() { defer wg.Done(); cps[i], errs[i] = controlplane.Start() }()
	}
	wg.Wait()
	for i, cp := range cps {
		if cp != nil {
			t.Cleanup(func() { _ = cp.Stop() })
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	e := &testEnv{ns: "converge"}
	scheme := newScheme()
	if e.c1, err = client.New(cps[0].Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if e.w1, err = client.NewWithWatch(cps[0].Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if e.c2, err = client.New(cps[1].Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cps[1].Kubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	if e.kubeconfig2, err = os.ReadFile(kc); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := engine.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c1.Patch(ctx, crd, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return e.c1.List(ctx, &v1alpha1.SyncList{}) == nil
	})
	e.create(t, e.c1, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})
	e.create(t, e.c1, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: authSecret},
		Data: map[string][]byte{"username": []byte(gitUser), "password": []byte(gitPassword)}})
	e.create(t, e.c1, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cluster2"},
		Data: map[string][]byte{"value": e.kubeconfig2}})

	root := t.TempDir()
	e.repo = gitserver.NewRepo(t, root, "config", "main")
	e.repo.CopyDir(t, filepath.Join("..", "..", "testdata", "example"), ".")
	e.repo.Commit(t, "example", nil)
	e.git = gitserver.NewHTTP(t, root, gitserver.HTTPOptions{Username: gitUser, Password: gitPassword})

	// Several tests of this package start an env, each registering the
	// controller "sync" in this one process.
	skipNames := true
	mgr, err := ctrl.NewManager(cps[0].Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: &skipNames}})
	if err != nil {
		t.Fatal(err)
	}
	e.reg = prometheus.NewRegistry()
	m, err := metrics.NewRecorder(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	opts := synccontroller.DefaultOptions()
	opts.DependencyRequeue, opts.RetryInterval, opts.HealthRequeue = 2*time.Second, 2*time.Second, 2*time.Second
	if tune != nil {
		tune(&opts)
	}
	e.hooks = &receiver.Index{}
	e.rec = &synccontroller.Reconciler{Engine: engine, Fetcher: source.NewFetcher(source.Options{CacheDir: t.TempDir()}),
		Metrics: m, Options: opts, Receivers: e.hooks}
	if err := e.rec.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return e
}

func zapLevel() zapcore.Level {
	if os.Getenv("SYNCCTL_TEST_DEBUG") != "" {
		return -1
	}
	return 0
}

func (e *testEnv) create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// sync creates a Sync of the test repository in e.ns with interval 1h
// (reconciles happen on creation, triggers and drift only) and wait false:
// no operator runs on these bare API servers, so no operand CR ever turns
// Available, and the tests are about GitOps, not health (the health gates
// have their tests in package reconciler and TestReport).
func (e *testEnv) sync(t *testing.T, name string, mutate func(*v1alpha1.Sync)) types.NamespacedName {
	t.Helper()
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha1.SyncSpec{
			Source: v1alpha1.GitSource{URL: e.git.RepoURL(e.repo), Ref: &v1alpha1.GitRef{Branch: "main"},
				SecretRef: &v1alpha1.LocalObjectReference{Name: authSecret}},
			Interval: metav1.Duration{Duration: time.Hour},
			Wait:     new(bool),
		},
	}
	if mutate != nil {
		mutate(s)
	}
	e.create(t, e.c1, s)
	return types.NamespacedName{Namespace: e.ns, Name: name}
}

// wait polls the Sync until cond holds, failing with its status when it
// does not within timeout; it returns the Sync and the time it took.
func (e *testEnv) wait(t *testing.T, key types.NamespacedName, timeout time.Duration, what string, cond func(*v1alpha1.Sync) bool) (*v1alpha1.Sync, time.Duration) {
	t.Helper()
	start := time.Now()
	s := &v1alpha1.Sync{}
	for {
		err := e.c1.Get(context.Background(), key, s)
		if err == nil && cond(s) {
			return s, time.Since(start)
		}
		if time.Since(start) > timeout {
			b, _ := json.MarshalIndent(s.Status.Conditions, "", "  ")
			t.Fatalf("Sync %s: %s not reached within %s (get: %v); lastApplied=%q lastAttempted=%q conditions:\n%s",
				key, what, timeout, err, s.Status.LastAppliedRevision, s.Status.LastAttemptedRevision, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gone polls until the Sync no longer exists.
func (e *testEnv) gone(t *testing.T, key types.NamespacedName, timeout time.Duration) {
	t.Helper()
	controlplane.Eventually(t, timeout, func() bool {
		return apierrors.IsNotFound(e.c1.Get(context.Background(), key, &v1alpha1.Sync{}))
	})
}

// request sets the reconcile request annotation to a new value and
// returns it.
func (e *testEnv) request(t *testing.T, key types.NamespacedName) string {
	t.Helper()
	v := time.Now().Format(time.RFC3339Nano)
	e.patchSync(t, key, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, v))
	return v
}

func (e *testEnv) patchSync(t *testing.T, key types.NamespacedName, patch string) {
	t.Helper()
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := e.c1.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("patching Sync %s: %v", key, err)
	}
}

// deleteSync deletes the Sync with the given deletionPolicy and waits
// until it is gone.
func (e *testEnv) deleteSync(t *testing.T, key types.NamespacedName, policy string) {
	t.Helper()
	e.patchSync(t, key, fmt.Sprintf(`{"spec":{"deletionPolicy":%q}}`, policy))
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := e.c1.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	e.gone(t, key, 2*time.Minute)
}

// commit edits hyperconverged.yaml (old → new) and commits; it returns
// the Flux-style revision the Sync will report.
func (e *testEnv) commit(t *testing.T, msg, old, new string) string {
	t.Helper()
	return "main@sha1:" + e.repo.Replace(t, msg, "hyperconverged.yaml", old, new)
}

func (e *testEnv) head(t *testing.T) string {
	return "main@sha1:" + gitserver.Git(t, e.repo.Dir, "rev-parse", "HEAD")
}

// statuses records every version of the Sync key written to cluster 1
// from now on until the returned func is called; that func gives them in
// order.
func (e *testEnv) statuses(t *testing.T, key types.NamespacedName) func() []*v1alpha1.Sync {
	t.Helper()
	w, err := e.w1.Watch(context.Background(), &v1alpha1.SyncList{}, client.InNamespace(key.Namespace),
		client.MatchingFields{"metadata.name": key.Name})
	if err != nil {
		t.Fatal(err)
	}
	var seen []*v1alpha1.Sync
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*v1alpha1.Sync); ok {
				seen = append(seen, s)
			}
		}
	}()
	return func() []*v1alpha1.Sync {
		w.Stop()
		<-done
		return seen
	}
}

func ready(s *v1alpha1.Sync) bool {
	return s.Generation == s.Status.ObservedGeneration && apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ReadyCondition)
}

func readyAt(rev string) func(*v1alpha1.Sync) bool {
	return func(s *v1alpha1.Sync) bool { return ready(s) && s.Status.LastAppliedRevision == rev }
}

func condition(s *v1alpha1.Sync, typ string) metav1.Condition {
	if c := apimeta.FindStatusCondition(s.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}
