package graph_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/graph"
)

func controllerObjects(t *testing.T, e *graph.Engine, in graph.ControllerOptions) map[string]*unstructured.Unstructured {
	t.Helper()
	objs, err := e.RenderController(in)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()+"/"+o.GetName()] = o
	}
	return m
}

func deploymentArgs(t *testing.T, objs map[string]*unstructured.Unstructured) []string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(objs["Deployment/converge-controller"].Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(cs))
	}
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return args
}

func servicePorts(objs map[string]*unstructured.Unstructured) []string {
	ps, _, _ := unstructured.NestedSlice(objs["Service/converge-controller"].Object, "spec", "ports")
	var out []string
	for _, p := range ps {
		p := p.(map[string]any)
		out = append(out, p["name"].(string))
	}
	return out
}

func TestRenderControllerOrderAndDefaults(t *testing.T) {
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := e.RenderController(graph.DefaultControllerOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	want := []string{
		"CustomResourceDefinition/syncs.converge.dev", "Namespace/converge-system",
		"ClusterRole/converge-controller", "ClusterRoleBinding/converge-controller",
		"ServiceAccount/converge-controller", "Role/converge-controller-leader-election",
		"RoleBinding/converge-controller-leader-election", "Service/converge-controller",
		"Deployment/converge-controller",
	}
	if !slices.Equal(got, want) {
		t.Errorf("objects in apply order:\n got %v\nwant %v", got, want)
	}
	m := controllerObjects(t, e, graph.DefaultControllerOptions())
	d := m["Deployment/converge-controller"]
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c := cs[0].(map[string]any)
	if c["image"] != "ghcr.io/converge-dev/converge-controller:dev" {
		t.Errorf("image %v, want the version's tag", c["image"])
	}
	for _, check := range []struct {
		path []string
		want any
	}{
		{[]string{"securityContext", "readOnlyRootFilesystem"}, true},
		{[]string{"securityContext", "allowPrivilegeEscalation"}, false},
		{[]string{"livenessProbe", "httpGet", "path"}, "/healthz"},
		{[]string{"readinessProbe", "httpGet", "path"}, "/readyz"},
	} {
		if v, _, _ := unstructured.NestedFieldNoCopy(c, check.path...); v != check.want {
			t.Errorf("container %v = %v, want %v", check.path, v, check.want)
		}
	}
	if v, _, _ := unstructured.NestedString(c, "resources", "limits", "memory"); v != "1024Mi" {
		t.Errorf("memory limit %q, want 1024Mi", v)
	}
	if env, _, _ := unstructured.NestedSlice(c, "env"); len(env) != 1 || env[0].(map[string]any)["name"] != "GOMEMLIMIT" || env[0].(map[string]any)["value"] != "921MiB" {
		t.Errorf("env %v, want GOMEMLIMIT=921MiB (90 %% of the memory limit)", env)
	}
	if drop, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop"); !slices.Equal(drop, []string{"ALL"}) {
		t.Errorf("capabilities.drop %v, want [ALL]", drop)
	}
	if v, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "securityContext", "seccompProfile", "type"); v != "RuntimeDefault" {
		t.Errorf("pod seccompProfile %q, want RuntimeDefault", v)
	}
	args := deploymentArgs(t, m)
	for _, a := range []string{"--cache-dir=/cache", "--leader-elect", "--webhook-service-name=converge-controller", "--webhook-service-namespace=converge-system", "--receiver-bind-address=:9292"} {
		if !slices.Contains(args, a) {
			t.Errorf("args %v lack %s", args, a)
		}
	}
	if p := servicePorts(m); !slices.Equal(p, []string{"https-webhook", "https-virt-api", "https-cdi-api", "https-uploadproxy", "https-cli-download", "http-receiver", "http-metrics"}) {
		t.Errorf("Service ports %v", p)
	}
}

func TestRenderControllerOptions(t *testing.T) {
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	in := graph.DefaultControllerOptions()
	in.Namespace, in.Image, in.Replicas, in.LogLevel = "gitops", "registry.local/converge:1.2.3", 2, "debug"
	in.Webhook, in.Receiver = false, false
	m := controllerObjects(t, e, in)
	if m["Namespace/gitops"] == nil {
		t.Fatalf("no Namespace gitops in %v", m)
	}
	for _, o := range m {
		if ns := o.GetNamespace(); ns != "" && ns != "gitops" {
			t.Errorf("%s/%s in namespace %q, want gitops", o.GetKind(), o.GetName(), ns)
		}
	}
	subj, _, _ := unstructured.NestedSlice(m["ClusterRoleBinding/converge-controller"].Object, "subjects")
	if subj[0].(map[string]any)["namespace"] != "gitops" {
		t.Errorf("ClusterRoleBinding subject %v, want the ServiceAccount in gitops", subj)
	}
	args := deploymentArgs(t, m)
	for _, a := range []string{"--webhook=false", "--zap-log-level=debug", "--receiver-bind-address=0"} {
		if !slices.Contains(args, a) {
			t.Errorf("args %v lack %s", args, a)
		}
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--webhook-service") }) {
		t.Errorf("args %v: the webhook is off, want no --webhook-service-*", args)
	}
	if p := servicePorts(m); !slices.Equal(p, []string{"http-metrics"}) {
		t.Errorf("Service ports %v, want only http-metrics", p)
	}
	if r, _, _ := unstructured.NestedInt64(m["Deployment/converge-controller"].Object, "spec", "replicas"); r != 2 {
		t.Errorf("replicas %d, want 2", r)
	}

	for _, tc := range []struct {
		name string
		in   func(*graph.ControllerOptions)
		want string
	}{
		{"namespace", func(o *graph.ControllerOptions) { o.Namespace = "Bad_NS" }, `option namespace: invalid value "Bad_NS"`},
		{"replicas", func(o *graph.ControllerOptions) { o.Replicas = -1 }, `option replicas: invalid value -1 (out of bound >=0)`},
		{"logLevel", func(o *graph.ControllerOptions) { o.LogLevel = "loud" }, `option logLevel: conflicting values`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := graph.DefaultControllerOptions()
			tc.in(&in)
			_, err := e.RenderController(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "controller bundle: ") {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// TestControllerArgsAreFlags builds the real converge-controller and checks
// that every argument the bundle's Deployment passes, with every option
// combination, is one of its flags.
func TestControllerArgsAreFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/converge-controller")
	}
	bin := filepath.Join(t.TempDir(), "converge-controller")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/converge-controller").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, "-h").CombinedOutput() // flag's -h exits 0 or 2 by version
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 5 {
		t.Fatalf("could not read converge-controller's flags from -h:\n%s", out)
	}
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	for _, webhook := range []bool{true, false} {
		for _, receiver := range []bool{true, false} {
			in := graph.DefaultControllerOptions()
			in.Webhook, in.Receiver = webhook, receiver
			for _, a := range deploymentArgs(t, controllerObjects(t, e, in)) {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !flags[name] {
					t.Errorf("webhook=%v receiver=%v: the Deployment passes %s, which converge-controller does not define", webhook, receiver, a)
				}
			}
		}
	}
}
