package crdgen

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// startAPIServer starts a real etcd and kube-apiserver from the binaries in
// the repository's bin directory, or skips the test if they are missing.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not starting kube-apiserver and etcd")
	}
	bin, err := filepath.Abs(filepath.Join("..", "..", "..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(bin, b)); err != nil || fi.Mode()&0o111 == 0 {
			t.Skipf("envtest needs %s in %s (built by hack/controlplane); not found, skipping the API server test", b, bin)
		}
	}
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// install creates crd and waits until the API server reports it
// Established.
func install(ctx context.Context, t *testing.T, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	if err := c.Create(ctx, crd.DeepCopy()); err != nil {
		t.Fatalf("the API server rejected the CRD: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got); err != nil {
			t.Fatal(err)
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.NonStructuralSchema && cond.Status == apiextensionsv1.ConditionTrue {
				t.Fatalf("CRD schema is not structural: %s", cond.Message)
			}
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRD %s not Established: %+v", crd.Name, got.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// create creates obj, retrying while the client's REST mapper does not yet
// know the new kind, and returns the error of the API server.
func create(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Create(ctx, obj)
		if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// resource returns a custom resource of the fixture with the given spec.
func resource(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       spec,
	}}
}

// TestAPIServer installs generated CRDs in a real kube-apiserver and checks
// that it applies the CUE defaults and rejects what CUE rejects.
func TestAPIServer(t *testing.T) {
	c := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("fixture", func(t *testing.T) {
		crd, err := Generate(fixture(t), fixtureNames)
		if err != nil {
			t.Fatal(err)
		}
		install(ctx, t, c, crd)
		apiVersion := fixtureNames.APIVersion()

		// spec: {} comes back with the CUE defaults filled in.
		hc := resource(apiVersion, "HyperConverged", "kubevirt-hyperconverged", map[string]any{})
		if err := create(ctx, c, hc); err != nil {
			t.Fatalf("create with spec {}: %v", err)
		}
		for _, d := range []struct {
			path []string
			want any
		}{
			{[]string{"spec", "uninstallStrategy"}, "BlockUninstallIfWorkloadsExist"},
			{[]string{"spec", "featureGates", "downwardMetrics"}, false},
			{[]string{"spec", "liveMigrationConfig", "parallelMigrationsPerCluster"}, int64(5)},
			{[]string{"spec", "liveMigrationConfig", "completionTimeoutPerGiB"}, int64(150)},
			{[]string{"spec", "certConfig", "ca", "duration"}, "48h0m0s"},
			{[]string{"spec", "certConfig", "ca", "renewBefore"}, "24h0m0s"},
			{[]string{"spec", "workloadUpdateStrategy", "batchEvictionSize"}, int64(10)},
			{[]string{"spec", "resourceRequirements", "vmiCPUAllocationRatio"}, int64(10)},
		} {
			got, found, err := unstructured.NestedFieldNoCopy(hc.Object, d.path...)
			if err != nil || !found || got != d.want {
				t.Errorf("%s: got %v (found %v, %v), want %v", strings.Join(d.path, "."), got, found, err, d.want)
			}
		}
		methods, _, _ := unstructured.NestedStringSlice(hc.Object, "spec", "workloadUpdateStrategy", "workloadUpdateMethods")
		if strings.Join(methods, ",") != "LiveMigrate,Evict" {
			t.Errorf("workloadUpdateMethods: got %v", methods)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(hc.Object, "spec", "tuningPolicy"); found {
			t.Errorf("tuningPolicy has no default but was set")
		}

		// CUE accepts null for null | "None" | ...; the API server drops
		// it (an enum cannot be nullable).
		nl := resource(apiVersion, "HyperConverged", "nullable", map[string]any{"evictionStrategy": nil})
		if err := create(ctx, c, nl); err != nil {
			t.Errorf("create with a null evictionStrategy: %v", err)
		} else if _, found, _ := unstructured.NestedFieldNoCopy(nl.Object, "spec", "evictionStrategy"); found {
			t.Errorf("null evictionStrategy was kept: %v", nl.Object["spec"])
		}

		// Closed structs prune unknown fields; open ones keep them.
		pr := resource(apiVersion, "HyperConverged", "pruning", map[string]any{
			"notInSchema": "dropped",
			"infra": map[string]any{"nodePlacement": map[string]any{
				"affinity": map[string]any{"anything": map[string]any{"goes": true}},
			}},
		})
		if err := create(ctx, c, pr); err != nil {
			t.Fatalf("create with unknown fields: %v", err)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(pr.Object, "spec", "notInSchema"); found {
			t.Errorf("unknown field of a closed struct was kept")
		}
		if got, _, _ := unstructured.NestedBool(pr.Object, "spec", "infra", "nodePlacement", "affinity", "anything", "goes"); !got {
			t.Errorf("field of an open struct was pruned: %v", pr.Object["spec"])
		}

		// Violations are rejected with an Invalid error naming the field.
		for _, bad := range []struct {
			name, field string
			spec        map[string]any
		}{
			{"enum", "spec.uninstallStrategy", map[string]any{"uninstallStrategy": "Bogus"}},
			{"nullable enum", "spec.evictionStrategy", map[string]any{"evictionStrategy": "Bogus"}},
			{"bound", "spec.liveMigrationConfig.parallelMigrationsPerCluster", map[string]any{
				"liveMigrationConfig": map[string]any{"parallelMigrationsPerCluster": int64(0)},
			}},
			{"nested enum", "spec.infra.nodePlacement.tolerations[0].operator", map[string]any{
				"infra": map[string]any{"nodePlacement": map[string]any{
					"tolerations": []any{map[string]any{"operator": "Maybe"}},
				}},
			}},
		} {
			err := create(ctx, c, resource(apiVersion, "HyperConverged", "bad-"+strings.ReplaceAll(bad.name, " ", "-"), bad.spec))
			if !apierrors.IsInvalid(err) {
				t.Errorf("%s: want an Invalid error, got %v", bad.name, err)
				continue
			}
			if !invalidField(err, bad.field) {
				t.Errorf("%s: error does not name %s: %v", bad.name, bad.field, err)
			}
			t.Logf("%s rejected: %v", bad.name, err)
		}
	})

	t.Run("project schema", func(t *testing.T) {
		crd, err := Generate(projectHyperConverged(t), hcoNames)
		if err != nil {
			t.Fatal(err)
		}
		install(ctx, t, c, crd)
		hc := resource(hcoNames.APIVersion(), "HyperConverged", "kubevirt-hyperconverged", map[string]any{})
		if err := create(ctx, c, hc); err != nil {
			t.Fatalf("create with spec {}: %v", err)
		}
		if got, _, _ := unstructured.NestedString(hc.Object, "spec", "uninstallStrategy"); got != "BlockUninstallIfWorkloadsExist" {
			t.Errorf("uninstallStrategy: got %q", got)
		}
		err = create(ctx, c, resource(hcoNames.APIVersion(), "HyperConverged", "bad", map[string]any{"uninstallStrategy": "Bogus"}))
		if !apierrors.IsInvalid(err) || !invalidField(err, "spec.uninstallStrategy") {
			t.Errorf("want an Invalid error naming spec.uninstallStrategy, got %v", err)
		}
	})
}

// invalidField reports whether the Invalid error err names field.
func invalidField(err error, field string) bool {
	var status apierrors.APIStatus
	if s, ok := err.(apierrors.APIStatus); ok {
		status = s
	} else {
		return strings.Contains(err.Error(), field)
	}
	if d := status.Status().Details; d != nil {
		for _, cause := range d.Causes {
			if cause.Field == field {
				return true
			}
		}
	}
	return strings.Contains(err.Error(), field)
}
