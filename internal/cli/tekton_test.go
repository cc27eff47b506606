package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/crdtest"
)

// TestApplyTektonTasks drives `converge apply` against a real
// kube-apiserver with Tekton's own Task CRD (testdata/tekton, v1.15.0):
// the facts discover Tekton, the KubeVirt Tekton tasks and their RBAC land
// in the HyperConverged's namespace with nothing of a Task dropped by
// Tekton's schema, each task's ServiceAccount may do what its ClusterRole
// grants there and nowhere else, and once Tekton is gone the next apply
// prunes the tasks' RBAC and succeeds.
func TestApplyTektonTasks(t *testing.T) {
	env, kubeconfig := cliEnv(t)
	config := exampleConfig(t)
	run := runner(kubeconfig)
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	crd := tektonTaskCRD(t)
	crdtest.Apply(t, c, crd)

	out, code := run("apply", "--revision", "r1", config)
	if code != 0 {
		t.Fatalf("apply exit %d:\n%s", code, out)
	}
	const ns = "kubevirt-hyperconverged"
	// Plain Kubernetes: the ten tasks of v0.26.0; six of them call the API
	// and come with a ClusterRole, ServiceAccount and RoleBinding.
	if n := countRows(out, "Task", "", "created"); n != 10 {
		t.Errorf("first apply created %d Tasks, want 10:\n%s", n, out)
	}
	for _, kind := range []string{"ClusterRole", "ServiceAccount", "RoleBinding"} {
		if n := countRows(out, kind, "-task", "created"); n != 6 {
			t.Errorf("first apply created %d %s named <task>-task, want 6:\n%s", n, kind, out)
		}
	}
	if strings.Contains(out, "create-vm-from-template") {
		t.Errorf("the template tasks were applied without the Template API:\n%s", out)
	}

	// Tekton's CRD keeps only the fields its schema knows: every Task must
	// read back as rendered, or the API server dropped part of it.
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := e.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Render(cfg, map[string]any{"platform": "kubernetes", "tektonPipelines": true})
	if err != nil {
		t.Fatal(err)
	}
	tasks := 0
	for _, o := range r.Objects() {
		if o.GetKind() != "Task" {
			continue
		}
		tasks++
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatalf("Task %s: %v", o.GetName(), err)
		}
		if a, b := jsonOf(t, o.Object["spec"]), jsonOf(t, live.Object["spec"]); a != b {
			t.Errorf("Task %s: spec read back differs from the rendered one (Tekton's schema dropped or changed a field)\nrendered: %s\nlive:     %s", o.GetName(), a, b)
		}
		if live.GetLabels()["app.kubernetes.io/version"] != "v0.26.0" {
			t.Errorf("Task %s labels %v, want app.kubernetes.io/version v0.26.0", o.GetName(), live.GetLabels())
		}
	}
	if tasks != 10 {
		t.Errorf("the render holds %d Tasks, want 10", tasks)
	}

	// RBAC as the release manifest sets it up: each task's ServiceAccount
	// may do in the tasks' namespace what its ClusterRole grants, and
	// nothing in another namespace.
	for _, tc := range []struct {
		sa, namespace, group, resource, verb string
		allowed                              bool
	}{
		{"create-vm-from-manifest-task", ns, "kubevirt.io", "virtualmachines", "create", true},
		{"create-vm-from-manifest-task", "default", "kubevirt.io", "virtualmachines", "create", false},
		{"cleanup-vm-task", ns, "kubevirt.io", "virtualmachines", "delete", true},
		{"cleanup-vm-task", ns, "kubevirt.io", "virtualmachines", "create", false},
		{"modify-data-object-task", ns, "cdi.kubevirt.io", "datavolumes", "create", true},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":" + tc.sa,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: tc.namespace, Group: tc.group, Resource: tc.resource, Verb: tc.verb,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("%s may %s %s/%s in %s: %v, want %v (%s)", tc.sa, tc.verb, tc.group, tc.resource, tc.namespace, sar.Status.Allowed, tc.allowed, sar.Status.Reason)
		}
	}

	out, code = run("diff", config)
	if code != 0 || strings.TrimSpace(out) != "no changes" {
		t.Errorf("diff after apply (exit %d) = %q, want no changes", code, out)
	}

	// Tekton uninstalled: its Tasks go with the CRD; the next apply
	// derives no tasks, prunes their RBAC and succeeds.
	if err := c.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(crd), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Task CRD not gone after 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, code = run("apply", "--revision", "r2", config)
	if code != 0 {
		t.Fatalf("apply after Tekton was removed: exit %d:\n%s", code, out)
	}
	if n := countRows(out, "Task", "", "deleted"); n != 10 {
		t.Errorf("apply after Tekton was removed recorded %d Tasks deleted (gone with their CRD), want 10:\n%s", n, out)
	}
	for _, kind := range []string{"ClusterRole", "ServiceAccount", "RoleBinding"} {
		if n := countRows(out, kind, "-task", "deleted"); n != 6 {
			t.Errorf("apply after Tekton was removed deleted %d %s named <task>-task, want 6:\n%s", n, kind, out)
		}
	}
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("rbac.authorization.k8s.io/v1")
	cr.SetKind("ClusterRole")
	if err := c.Get(ctx, client.ObjectKey{Name: "cleanup-vm-task"}, cr); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole cleanup-vm-task after the prune: %v, want not found", err)
	}
}

// tektonTaskCRD reads the pinned Task CRD of testdata/tekton.
func tektonTaskCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "tekton", "300-task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	crd := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&crd.Object); err != nil && !errors.Is(err, os.ErrClosed) {
		t.Fatal(err)
	}
	if crd.GetKind() != "CustomResourceDefinition" || crd.GetName() != "tasks.tekton.dev" {
		t.Fatalf("testdata/tekton/300-task.yaml holds %s %s, want the CRD tasks.tekton.dev", crd.GetKind(), crd.GetName())
	}
	return crd
}

// countRows counts the rows of a PrintChangeSet table of kind whose name
// ends in suffix and whose action is action.
func countRows(out, kind, suffix, action string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] == kind && strings.HasSuffix(f[2], suffix) && f[3] == action {
			n++
		}
	}
	return n
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
