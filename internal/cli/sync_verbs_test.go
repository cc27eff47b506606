package cli_test

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/cli"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/safebuffer"
)

// fakeController plays converge-controller's part in the reconcile
// protocol, writing status through the status subresource as the
// controller does: for each Sync of ns named in outcomes whose
// reconcile-requested-at annotation is not yet handled, it sets
// lastHandledReconcileAt to it and Ready to the outcome (True, or False
// with ApplyFailed).
type fakeController struct {
	c        client.Client
	ns       string
	mu       sync.Mutex
	outcomes map[string]metav1.ConditionStatus
}

func (f *fakeController) set(name string, s metav1.ConditionStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcomes[name] = s
}

func (f *fakeController) run(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		list := &v1alpha1.SyncList{}
		if err := f.c.List(ctx, list, client.InNamespace(f.ns)); err == nil {
			for i := range list.Items {
				s := &list.Items[i]
				f.mu.Lock()
				outcome, ok := f.outcomes[s.Name]
				f.mu.Unlock()
				at := s.Annotations[v1alpha1.ReconcileRequestAnnotation]
				if !ok || at == "" || at == s.Status.LastHandledReconcileAt || s.Spec.Suspend {
					continue
				}
				ready := metav1.Condition{Type: v1alpha1.ReadyCondition, Status: outcome, ObservedGeneration: s.Generation,
					Reason: v1alpha1.SucceededReason, Message: "Applied revision: main@sha1:2222222222222222222222222222222222222222"}
				if outcome == metav1.ConditionFalse {
					ready.Reason, ready.Message = v1alpha1.ApplyFailedReason, "KubeVirt kubevirt-hyperconverged/kubevirt: admission webhook denied the request"
				} else {
					s.Status.LastAppliedRevision = "main@sha1:2222222222222222222222222222222222222222"
				}
				meta.SetStatusCondition(&s.Status.Conditions, ready)
				s.Status.LastHandledReconcileAt = at
				s.Status.ObservedGeneration = s.Generation
				if err := f.c.Status().Update(ctx, s); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
					t.Errorf("fake controller: %v", err)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestSyncVerbs installs the bundle with `converge install` into a real
// kube-apiserver, then drives get, tree, events, suspend, resume and
// reconcile against Syncs whose status the test writes as the controller
// would.
func TestSyncVerbs(t *testing.T) {
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) {
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	env, kubeconfig := cliEnv(t)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		start := time.Now()
		code := cli.Run(append([]string{"--kubeconfig", kubeconfig}, args...), &out, &errb)
		t.Logf("converge %s: exit %d in %s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond))
		return out.String(), errb.String(), code
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	// Before install the cluster has no Sync API.
	if _, stderr, code := run("get"); code != 1 || !strings.Contains(stderr, "does not serve the Sync API (CRD syncs.converge.dev): run converge install") {
		t.Errorf("get before install: exit %d, stderr %q", code, stderr)
	}

	// install: every object of the bundle passes the API server's
	// validation; a second run changes nothing.
	install := []string{"install", "--wait=false", "--sync-url", "https://git.example.com/platform/hco.git", "--sync-branch", "main", "--sync-path", "clusters/prod", "--sync-name", "prod"}
	out, stderr, code := run(install...)
	if code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, stderr)
	}
	wantSubjects := []string{
		"CustomResourceDefinition/syncs.converge.dev", "Namespace/converge-system",
		"ClusterRole/converge-controller", "ClusterRoleBinding/converge-controller",
		"ServiceAccount/converge-system/converge-controller", "Role/converge-system/converge-controller-leader-election",
		"RoleBinding/converge-system/converge-controller-leader-election", "Service/converge-system/converge-controller",
		"Deployment/converge-system/converge-controller", "Sync/converge-system/prod",
	}
	checkLines := func(out, action string) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var got []string
		for _, l := range lines {
			subject, act, _ := strings.Cut(l, " ")
			got = append(got, subject)
			if act != action {
				t.Errorf("install line %q: want action %s", l, action)
			}
		}
		if !slices.Equal(got, wantSubjects) {
			t.Errorf("install printed\n%s\nwant the subjects %v", out, wantSubjects)
		}
	}
	checkLines(out, "created")
	out, stderr, code = run(install...)
	if code != 0 {
		t.Fatalf("second install: exit %d\n%s%s", code, out, stderr)
	}
	checkLines(out, "unchanged")
	// --wait (the default) waits for the Deployment, which never rolls
	// out on an API server without controllers: the wait ends at --timeout.
	out, stderr, code = run("install", "--timeout", "3s")
	if code != 1 || !strings.Contains(stderr, "error: waiting for converge-controller: timeout waiting for: [Deployment/converge-system/converge-controller status: 'InProgress'") {
		t.Errorf("install --timeout 3s: exit %d\n%s%s", code, out, stderr)
	}
	prod := &v1alpha1.Sync{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "converge-system", Name: "prod"}, prod); err != nil {
		t.Fatal(err)
	}
	if src := prod.Spec.Source; src.URL != "https://git.example.com/platform/hco.git" || src.Ref == nil || src.Ref.Branch != "main" || src.Path != "clusters/prod" || prod.Spec.Interval.Duration != 5*time.Minute {
		t.Errorf("installed Sync spec %+v, want the flags and the CRD's default interval 5m", prod.Spec)
	}

	// The objects a Sync applied, live in the cluster: a ConfigMap of
	// component hco, a Deployment of virt that has rolled out and one that
	// has not; the inventory also lists the Sync CRD (component crds), a
	// ConfigMap of virt that is gone, a Namespace of a component the status
	// does not list and one recorded without a component.
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "settings"}},
		deployment("api"), deployment("web"),
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	api := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "api"}, api); err != nil {
		t.Fatal(err)
	}
	api.Status = appsv1.DeploymentStatus{ObservedGeneration: api.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		}}
	if err := c.Status().Update(ctx, api); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	prod.Status = v1alpha1.SyncStatus{
		ObservedGeneration: prod.Generation,
		Conditions: []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, ObservedGeneration: prod.Generation, LastTransitionTime: now,
			Reason: v1alpha1.SucceededReason, Message: "Applied revision: main@sha1:1111111111111111111111111111111111111111"}},
		LastAppliedRevision: "main@sha1:1111111111111111111111111111111111111111",
		Inventory: &v1alpha1.Inventory{Entries: []v1alpha1.InventoryEntry{
			{ID: "_apps__Namespace", Version: "v1"},
			{ID: "_syncs.converge.dev_apiextensions.k8s.io_CustomResourceDefinition", Version: "apiextensions.k8s.io/v1", Component: "crds"},
			{ID: "_tenant__Namespace", Version: "v1", Component: "ssp"},
			{ID: "apps_api_apps_Deployment", Version: "apps/v1", Component: "virt"},
			{ID: "apps_gone__ConfigMap", Version: "v1", Component: "virt"},
			{ID: "apps_settings__ConfigMap", Version: "v1", Component: "hco"},
			{ID: "apps_web_apps_Deployment", Version: "apps/v1", Component: "virt"},
		}},
		Components: []v1alpha1.ComponentStatus{
			{Name: "hco", Health: "Healthy"},
			{Name: "virt", Health: "Progressing", Message: "waiting for Deployment apps/web"},
			{Name: "cdi", Health: "Waiting"},
		},
	}
	if err := c.Status().Update(ctx, prod); err != nil {
		t.Fatal(err)
	}
	newSync := func(ns, name string, mutate func(*v1alpha1.Sync)) {
		s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.SyncSpec{Source: v1alpha1.GitSource{URL: "https://git.example.com/platform/hco.git"}}}
		if mutate != nil {
			mutate(s)
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	newSync("converge-system", "staging", nil)
	newSync("tenant", "edge", nil)
	newSync("converge-system", "remote", func(s *v1alpha1.Sync) {
		s.Spec.Target = &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: "remote-kubeconfig"}}}
	})
	remote := &v1alpha1.Sync{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "converge-system", Name: "remote"}, remote); err != nil {
		t.Fatal(err)
	}
	remote.Status.Inventory = &v1alpha1.Inventory{Entries: []v1alpha1.InventoryEntry{{ID: "apps_settings__ConfigMap", Version: "v1", Component: "hco"}}}
	if err := c.Status().Update(ctx, remote); err != nil {
		t.Fatal(err)
	}

	t.Run("get", func(t *testing.T) {
		out, _, code := run("get")
		want := `NAME     REVISION                                            SUSPENDED  READY    MESSAGE
prod     main@sha1:1111111111111111111111111111111111111111  False      True     Applied revision: main@sha1:1111111111111111111111111111111111111111
remote   -                                                   False      Unknown  
staging  -                                                   False      Unknown  
`
		if code != 0 || out != want {
			t.Errorf("get: exit %d\n%s\nwant\n%s", code, out, want)
		}
		out, _, _ = run("get", "syncs", "-A")
		if !strings.HasPrefix(out, "NAMESPACE        NAME") || !regexp.MustCompile(`(?m)^tenant +edge +- +False +Unknown`).MatchString(out) || strings.Count(out, "\n") != 5 {
			t.Errorf("get -A:\n%s", out)
		}
		out, _, code = run("get", "sync", "prod")
		if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, "prod ") {
			t.Errorf("get sync prod: exit %d\n%s", code, out)
		}
		_, stderr, code := run("get", "sync", "nope")
		if code != 1 || stderr != "error: Sync converge-system/nope not found\n" {
			t.Errorf("get sync nope: exit %d, stderr %q", code, stderr)
		}
		out, stderr, code = run("get", "-n", "empty")
		if code != 0 || out != "" || stderr != "no Syncs found in namespace empty\n" {
			t.Errorf("get -n empty: exit %d, %q %q", code, out, stderr)
		}
	})

	t.Run("tree", func(t *testing.T) {
		out, _, code := run("tree", "prod")
		want := `Sync/converge-system/prod [Ready=True] main@sha1:1111111111111111111111111111111111111111
├── crds
│   └── CustomResourceDefinition/syncs.converge.dev [Current]
├── hco [Healthy]
│   └── ConfigMap/apps/settings [Current]
├── virt [Progressing] waiting for Deployment apps/web
│   ├── Deployment/apps/api [Current]
│   ├── ConfigMap/apps/gone [NotFound]
│   └── Deployment/apps/web [InProgress] Replicas: 0/1
├── cdi [Waiting]
├── ssp
│   └── Namespace/tenant [Current]
└── Namespace/apps [Current]
`
		if code != 0 || out != want {
			t.Errorf("tree prod: exit %d\n%s\nwant\n%s", code, out, want)
		}
		// A Sync with spec.target reads its objects through the Secret's kubeconfig.
		_, stderr, code := run("tree", "remote")
		if code != 1 || stderr != "error: Sync converge-system/remote: target kubeconfig Secret converge-system/remote-kubeconfig not found\n" {
			t.Errorf("tree remote without its Secret: exit %d, stderr %q", code, stderr)
		}
		b, err := os.ReadFile(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "converge-system", Name: "remote-kubeconfig"}, Data: map[string][]byte{"value": b}}); err != nil {
			t.Fatal(err)
		}
		out, _, code = run("tree", "remote")
		if want := "Sync/converge-system/remote [Ready=Unknown] -\n└── hco\n    └── ConfigMap/apps/settings [Current]\n"; code != 0 || out != want {
			t.Errorf("tree remote: exit %d\n%s\nwant\n%s", code, out, want)
		}
		_, stderr, code = run("tree", "nope", "-n", "tenant")
		if code != 1 || stderr != "error: Sync tenant/nope not found\n" {
			t.Errorf("tree nope: exit %d, stderr %q", code, stderr)
		}
	})

	// The workloads of a Sync are judged by their own rules, as the Sync
	// judges them: a Halted VM that is stopped is Current, a DataVolume
	// importing is InProgress with its progress.
	t.Run("tree of workloads", func(t *testing.T) {
		crdtest.Install(t, c, "virtualmachines", "datavolumes")
		objs := []string{
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: vms}\n",
			"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: halted, namespace: vms}\nspec: {runStrategy: Halted, template: {spec: {domain: {devices: {}}}}}\nstatus: {printableStatus: Stopped}\n",
			"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: web, namespace: vms}\nspec: {runStrategy: Always, template: {spec: {domain: {devices: {}}}}}\nstatus: {created: true, printableStatus: Starting}\n",
			"apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata: {name: disk, namespace: vms}\nspec: {source: {blank: {}}, storage: {resources: {requests: {storage: 1Gi}}}}\nstatus: {phase: ImportInProgress, progress: 45.50%}\n",
		}
		for _, y := range objs {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
				t.Fatal(err)
			}
			st, hasStatus := u.Object["status"]
			if err := c.Create(ctx, u); err != nil {
				t.Fatal(err)
			}
			if hasStatus {
				u.Object["status"] = st
				if err := c.Status().Update(ctx, u); err != nil {
					t.Fatal(err)
				}
			}
		}
		newSync("converge-system", "vms", nil)
		s := &v1alpha1.Sync{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "converge-system", Name: "vms"}, s); err != nil {
			t.Fatal(err)
		}
		s.Status.Inventory = &v1alpha1.Inventory{Entries: []v1alpha1.InventoryEntry{
			{ID: "_vms__Namespace", Version: "v1", Component: "workloads"},
			{ID: "vms_disk_cdi.kubevirt.io_DataVolume", Version: "cdi.kubevirt.io/v1beta1", Component: "workloads"},
			{ID: "vms_halted_kubevirt.io_VirtualMachine", Version: "kubevirt.io/v1", Component: "workloads"},
			{ID: "vms_web_kubevirt.io_VirtualMachine", Version: "kubevirt.io/v1", Component: "workloads"},
		}}
		s.Status.Components = []v1alpha1.ComponentStatus{{Name: "workloads", Health: "Progressing",
			Message: "DataVolume/vms/disk Progressing: ImportInProgress 45.50%; VirtualMachine/vms/web Progressing: Starting (runStrategy Always: waiting for Ready)"}}
		if err := c.Status().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		out, _, code := run("tree", "vms")
		want := `Sync/converge-system/vms [Ready=Unknown] -
└── workloads [Progressing] DataVolume/vms/disk Progressing: ImportInProgress 45.50%; VirtualMachine/vms/web Progressing: Starting (runStrategy Always: waiting for Ready)
    ├── Namespace/vms [Current]
    ├── DataVolume/vms/disk [InProgress] ImportInProgress 45.50%
    ├── VirtualMachine/vms/halted [Current]
    └── VirtualMachine/vms/web [InProgress] Starting (runStrategy Always: waiting for Ready)
`
		if code != 0 || out != want {
			t.Errorf("tree vms: exit %d\n%s\nwant\n%s", code, out, want)
		}
	})

	t.Run("events", func(t *testing.T) {
		base := time.Now().Add(-10 * time.Minute)
		event := func(ns, name, kind, object, reason, msg string, age time.Duration) {
			t.Helper()
			apiVersion := v1alpha1.GroupVersion.String()
			if kind != v1alpha1.SyncKind {
				apiVersion = "v1"
			}
			e := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: name},
				InvolvedObject: corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: object},
				Reason:         reason, Message: msg, Type: corev1.EventTypeNormal,
				FirstTimestamp: metav1.NewTime(base), LastTimestamp: metav1.NewTime(time.Now().Add(-age)),
				Source: corev1.EventSource{Component: "converge-controller"},
			}
			if reason == "ApplyFailed" {
				e.Type = corev1.EventTypeWarning
			}
			if err := c.Create(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		event("converge-system", "prod.1", "Sync", "prod", "ReconciliationSucceeded", "Applied revision main@sha1:1111", 3*time.Minute)
		event("converge-system", "prod.2", "Sync", "prod", "Progressing", "ConfigMap apps/settings configured", 70*time.Second)
		event("converge-system", "prod.3", "Sync", "prod", "ApplyFailed", "KubeVirt kubevirt: denied", 2*time.Minute)
		event("converge-system", "staging.1", "Sync", "staging", "FetchFailed", "https://git.example.com/platform/hco.git: authentication required", 90*time.Second)
		event("converge-system", "cm.1", "ConfigMap", "prod", "Other", "not a Sync's", 30*time.Second)
		event("tenant", "edge.1", "Sync", "edge", "ReconciliationSucceeded", "Applied revision main@sha1:3333", 5*time.Minute)

		out, _, code := run("events", "prod")
		want := []string{
			"Normal ReconciliationSucceeded Sync/prod Applied revision main@sha1:1111",
			"Warning ApplyFailed Sync/prod KubeVirt kubevirt: denied",
			"Normal Progressing Sync/prod ConfigMap apps/settings configured",
		}
		if got := rowsWithoutAge(out); code != 0 || !strings.HasPrefix(out, "LAST SEEN  TYPE     REASON                   OBJECT     MESSAGE\n") || !slices.Equal(got, want) {
			t.Errorf("events prod: exit %d\n%s\nwant the rows (after LAST SEEN) %q", code, out, want)
		}
		// The ages grow while the test runs (a loaded machine adds
		// seconds): compare their leading unit only.
		if ages := column(out, 0); len(ages) != 3 || !strings.HasPrefix(ages[0], "3m") || !strings.HasPrefix(ages[1], "2m") || !strings.HasPrefix(ages[2], "7") {
			t.Errorf("events prod LAST SEEN %v, want 3m… 2m… 7…s", ages)
		}
		out, _, _ = run("events")
		if reasons := column(out, 2); !slices.Equal(reasons, []string{"ReconciliationSucceeded", "ApplyFailed", "FetchFailed", "Progressing"}) {
			t.Errorf("events (every Sync of converge-system) reasons %v:\n%s", reasons, out)
		}
		out, _, _ = run("events", "-A")
		if ns := column(out, 0); !slices.Equal(ns, []string{"tenant", "converge-system", "converge-system", "converge-system", "converge-system"}) {
			t.Errorf("events -A namespaces %v:\n%s", ns, out)
		}
		_, stderr, code := run("events", "nope")
		if code != 1 || stderr != "error: Sync converge-system/nope not found\n" {
			t.Errorf("events nope: exit %d, stderr %q", code, stderr)
		}

		// --watch prints the list, then each new Event of the Sync, until cancelled.
		wctx, cancel := context.WithCancel(ctx)
		var wout, werr safebuffer.Buffer
		done := make(chan int)
		go func() {
			done <- cli.RunContext(wctx, []string{"--kubeconfig", kubeconfig, "events", "prod", "--watch"}, &wout, &werr)
		}()
		controlplane.Eventually(t, 30*time.Second, func() bool { return strings.Contains(wout.String(), "Progressing") })
		event("converge-system", "staging.2", "Sync", "staging", "Ignored", "another Sync's", 0)
		event("converge-system", "prod.4", "Sync", "prod", "DriftCorrected", "ConfigMap apps/settings re-applied", 0)
		controlplane.Eventually(t, 30*time.Second, func() bool { return strings.Contains(wout.String(), "DriftCorrected") })
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("events --watch ended with exit %d: %s", code, werr.String())
		}
		if got := wout.String(); strings.Contains(got, "Ignored") || !regexp.MustCompile(`(?m)^\d+s +Normal +DriftCorrected +Sync/prod +ConfigMap apps/settings re-applied$`).MatchString(got) {
			t.Errorf("events --watch printed:\n%s", got)
		}
	})

	fc := &fakeController{c: c, ns: "converge-system", outcomes: map[string]metav1.ConditionStatus{}}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go fc.run(fctx, t)

	t.Run("suspend-resume", func(t *testing.T) {
		fc.set("prod", metav1.ConditionTrue)
		out, _, code := run("suspend", "sync", "prod")
		if code != 0 || out != "Sync converge-system/prod suspended\n" {
			t.Errorf("suspend: exit %d, %q", code, out)
		}
		s := &v1alpha1.Sync{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(prod), s); err != nil {
			t.Fatal(err)
		}
		if !s.Spec.Suspend || !slices.ContainsFunc(s.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == cli.CLIFieldManager }) {
			t.Errorf("after suspend: spec.suspend %v, managers %v; want true, written by %s", s.Spec.Suspend, managers(s), cli.CLIFieldManager)
		}
		out, _, _ = run("get", "sync", "prod")
		if !regexp.MustCompile(`(?m)^prod +\S+ +True +True`).MatchString(out) {
			t.Errorf("get after suspend does not show SUSPENDED True:\n%s", out)
		}
		_, stderr, code := run("reconcile", "sync", "prod")
		if code != 1 || !strings.Contains(stderr, "Sync converge-system/prod is suspended: resume it with converge resume sync prod -n converge-system") {
			t.Errorf("reconcile of a suspended Sync: exit %d, stderr %q", code, stderr)
		}

		out, stderr, code = run("resume", "sync", "prod", "--timeout", "1m")
		if code != 0 || out != "Sync converge-system/prod reconciled: revision main@sha1:2222222222222222222222222222222222222222\nReady=True ReconciliationSucceeded: Applied revision: main@sha1:2222222222222222222222222222222222222222\n" {
			t.Errorf("resume: exit %d\n%s%s", code, out, stderr)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(prod), s); err != nil {
			t.Fatal(err)
		}
		if s.Spec.Suspend || s.Status.LastHandledReconcileAt != s.Annotations[v1alpha1.ReconcileRequestAnnotation] {
			t.Errorf("after resume: spec.suspend %v, handled %q, requested %q", s.Spec.Suspend, s.Status.LastHandledReconcileAt, s.Annotations[v1alpha1.ReconcileRequestAnnotation])
		}
	})

	t.Run("reconcile", func(t *testing.T) {
		before := time.Now()
		out, stderr, code := run("reconcile", "sync", "prod", "--with-source")
		if code != 0 || !strings.HasPrefix(out, "Sync converge-system/prod reconciled: revision main@sha1:2222") {
			t.Errorf("reconcile: exit %d\n%s%s", code, out, stderr)
		}
		s := &v1alpha1.Sync{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(prod), s); err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339Nano, s.Annotations[v1alpha1.ReconcileRequestAnnotation])
		if err != nil || at.Before(before.Add(-time.Second)) || s.Status.LastHandledReconcileAt != s.Annotations[v1alpha1.ReconcileRequestAnnotation] {
			t.Errorf("annotation %q (parse error %v), handled %q: want a fresh RFC 3339 time, handled", s.Annotations[v1alpha1.ReconcileRequestAnnotation], err, s.Status.LastHandledReconcileAt)
		}

		// A failed reconcile: exit 1 with the Ready message.
		fc.set("prod", metav1.ConditionFalse)
		out, stderr, code = run("reconcile", "sync", "prod")
		if code != 1 || out != "" || !strings.HasSuffix(stderr, "error: Sync converge-system/prod reconcile failed: ApplyFailed: KubeVirt kubevirt-hyperconverged/kubevirt: admission webhook denied the request\n") {
			t.Errorf("failed reconcile: exit %d\n%s%s", code, out, stderr)
		}

		// No controller handles staging: the wait ends at --timeout.
		start := time.Now()
		_, stderr, code = run("reconcile", "sync", "staging", "--timeout", "2s")
		t.Logf("reconcile --timeout 2s returned after %s", time.Since(start).Round(time.Millisecond))
		if code != 1 || !regexp.MustCompile(`error: Sync converge-system/staging: no reconcile result for the request \S+ within 2s: the controller did not handle it \(is converge-controller running\?\)\n$`).MatchString(stderr) {
			t.Errorf("reconcile timeout: exit %d, stderr %q", code, stderr)
		}
		_, stderr, code = run("reconcile", "sync", "nope")
		if code != 1 || stderr != "error: Sync converge-system/nope not found\n" {
			t.Errorf("reconcile nope: exit %d, stderr %q", code, stderr)
		}
		_, stderr, code = run("suspend", "sync", "nope", "-n", "tenant")
		if code != 1 || stderr != "error: Sync tenant/nope not found\n" {
			t.Errorf("suspend nope: exit %d, stderr %q", code, stderr)
		}
	})
}

func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
			},
		},
	}
}

// column gives the i-th whitespace-separated field of each row after the
// header.
func column(table string, i int) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		if f := strings.Fields(l); len(f) > i {
			out = append(out, f[i])
		}
	}
	return out
}

// rowsWithoutAge gives the rows of an events table after its header, each
// without its LAST SEEN and with single spaces between the fields.
func rowsWithoutAge(table string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		out = append(out, strings.Join(strings.Fields(l)[1:], " "))
	}
	return out
}

func managers(o metav1.Object) []string {
	var out []string
	for _, m := range o.GetManagedFields() {
		out = append(out, m.Manager)
	}
	return out
}
