package graph_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/graph"
)

// kubeVirtCR is a KubeVirt CR as the graph derives it and the API server
// returns it (with status and managed fields the roles must not see).
func kubeVirtCR(spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt-kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged",
			"annotations": map[string]any{"converge.dev/operator": "native"}, "generation": int64(3),
			"managedFields": []any{map[string]any{"manager": "converge"}}},
		"status": map[string]any{"phase": "Deploying"},
	}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

// TestRoles evaluates the KubeVirt roles through Engine.Roles: objects in
// apply order (ServiceAccount, RBAC and the node restriction policy before
// the DaemonSet), in the given
// namespace, running the given node image, placed and pulled per the CR.
func TestRoles(t *testing.T) {
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	if got := e.RoleKinds(); !contains(got, "KubeVirt") {
		t.Errorf("RoleKinds = %v, want KubeVirt among them", got)
	}
	cr := kubeVirtCR(map[string]any{
		"imagePullPolicy": "Always",
		"workloads":       map[string]any{"nodePlacement": map[string]any{"nodeSelector": map[string]any{"kubevirt": "yes"}}},
	})
	r, err := e.Roles("KubeVirt", cr, graph.RoleInputs{Namespace: "kubevirt-hyperconverged", Images: map[string]string{"node": "registry.local/converge-node:v9"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Refusals) != 0 {
		t.Errorf("refusals %v", r.Refusals)
	}
	var kinds []string
	var ds *unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GroupVersionKind().Group == "instancetype.kubevirt.io" {
			continue // the common instancetypes: testdata/roles/virt/common-instancetypes.txtar
		}
		if strings.Contains(o.GetName(), "kubevirt.io:") {
			continue // the users' ClusterRoles: testdata/roles/virt/user-roles.txtar
		}
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		if o.GetKind() == "DaemonSet" {
			ds = o
		}
	}
	want := "ClusterRole/converge-vm-agent ClusterRoleBinding/converge-vm-agent ClusterRoleBinding/converge-vm-agent-auth-delegator ServiceAccount/converge-vm-agent " +
		"ValidatingAdmissionPolicy/converge-vm-agent-node-restriction ValidatingAdmissionPolicyBinding/converge-vm-agent-node-restriction DaemonSet/converge-vm-agent"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("objects %s\nwant    %s", got, want)
	}
	if ds == nil {
		t.Fatal("no DaemonSet")
	}
	if ds.GetNamespace() != "kubevirt-hyperconverged" {
		t.Errorf("DaemonSet namespace %q", ds.GetNamespace())
	}
	sel, _, _ := unstructured.NestedStringMap(ds.Object, "spec", "template", "spec", "nodeSelector")
	if sel["kubevirt"] != "yes" {
		t.Errorf("nodeSelector %v, want the CR's workloads placement", sel)
	}
	cs, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		c := c.(map[string]any)
		if c["image"] != "registry.local/converge-node:v9" || c["imagePullPolicy"] != "Always" {
			t.Errorf("container %v: image %v pull %v", c["name"], c["image"], c["imagePullPolicy"])
		}
	}

	// A kind without roles, and a CR the definition cannot take.
	if _, err := e.Roles("SSP", cr, graph.RoleInputs{Namespace: "x", Images: map[string]string{"node": "n"}}); err == nil {
		t.Error("roles of SSP: no error")
	}
	bad := kubeVirtCR(map[string]any{"imagePullPolicy": 3})
	_, err = e.Roles("KubeVirt", bad, graph.RoleInputs{Namespace: "x", Images: map[string]string{"node": "n"}})
	t.Logf("bad CR: %v", err)
	if err == nil || !strings.Contains(err.Error(), "KubeVirt kubevirt-hyperconverged/kubevirt-kubevirt-hyperconverged") || !strings.Contains(err.Error(), "imagePullPolicy") {
		t.Errorf("roles of a KubeVirt with imagePullPolicy 3: %v, want an error naming it", err)
	}
}

// BenchmarkRoles measures one derivation of the KubeVirt roles, what the
// virt operator pays per reconcile of a changed CR.
func BenchmarkRoles(b *testing.B) {
	e, err := graph.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	cr := kubeVirtCR(map[string]any{"workloads": map[string]any{"nodePlacement": map[string]any{"nodeSelector": map[string]any{"kubernetes.io/os": "linux"}}}})
	in := graph.RoleInputs{Namespace: "kubevirt-hyperconverged", Images: map[string]string{"node": "ghcr.io/converge-dev/converge-node:dev"}}
	for b.Loop() {
		if _, err := e.Roles("KubeVirt", cr, in); err != nil {
			b.Fatal(err)
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestRolesOfDerivedKubeVirt feeds the KubeVirt CR the graph derives for
// `spec: {}` to the native virt operator's roles, as a Sync does: HCO's
// architectureConfiguration (amd64 q35 with KubeVirt's default emulated
// machines q35*, pc-q35*) and smbios are accepted without a refusal, and
// the VM agent gets amd64's machine type, q35, its own default.
func TestRolesOfDerivedKubeVirt(t *testing.T) {
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	kv := derivedKubeVirt(t, e)
	if mt, _, _ := unstructured.NestedString(kv.Object, "spec", "configuration", "architectureConfiguration", "amd64", "machineType"); mt != "q35" {
		t.Fatalf("derived amd64 machineType %q, want HCO's q35", mt)
	}
	roles, err := e.Roles("KubeVirt", kv, graph.RoleInputs{Namespace: kv.GetNamespace(), Images: map[string]string{"node": "registry.local/converge-node:v9"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(roles.Refusals) != 0 {
		t.Errorf("the derived KubeVirt is refused: %v", roles.Refusals)
	}
	var args []string
	for _, o := range roles.Objects {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			c := c.(map[string]any)
			if c["name"] == "vm-agent" {
				for _, a := range c["args"].([]any) {
					args = append(args, a.(string))
				}
			}
		}
	}
	if !contains(args, "--machine-type=q35") {
		t.Errorf("vm-agent args %v, want --machine-type=q35", args)
	}
}

// derivedKubeVirt gives the KubeVirt CR e derives from an HC with
// defaults (spec: {}), as a Sync applies it.
func derivedKubeVirt(tb testing.TB, e *graph.Engine) *unstructured.Unstructured {
	tb.Helper()
	dir := tb.TempDir()
	hc := "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nmetadata:\n  name: kubevirt-hyperconverged\n  namespace: kubevirt-hyperconverged\nspec: {}\n"
	if err := os.WriteFile(filepath.Join(dir, "hc.yaml"), []byte(hc), 0o644); err != nil {
		tb.Fatal(err)
	}
	cfg, err := e.LoadConfig(dir)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := e.RenderWith(cfg, graph.Inputs{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, o := range r.Objects() {
		if o.GetKind() == "KubeVirt" {
			return o.DeepCopy()
		}
	}
	tb.Fatal("no KubeVirt rendered")
	return nil
}
