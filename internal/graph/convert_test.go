package graph_test

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
)

// TestConvertHyperConverged checks the conversion webhook's core: v1beta1
// objects become v1 with HCO's field moves, v1 objects survive a round trip
// through v1beta1 (v1-only fields ride in the annotation), metadata and
// status are kept.
func TestConvertHyperConverged(t *testing.T) {
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	decode := func(s string) map[string]any {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	v1beta1 := decode(`
apiVersion: hco.kubevirt.io/v1beta1
kind: HyperConverged
metadata: {name: kubevirt-hyperconverged, namespace: kubevirt-hyperconverged, uid: u1, resourceVersion: "7", labels: {a: b}}
spec:
  featureGates: {downwardMetrics: true, persistentReservation: true}
  infra: {nodePlacement: {nodeSelector: {infra: "true"}}}
  resourceRequirements: {vmiCPUAllocationRatio: 4}
  enableApplicationAwareQuota: true
status: {systemHealthStatus: healthy}
`)
	v1, err := e.ConvertHyperConverged(v1beta1, graph.HCV1)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		path []string
		want any
	}{
		{[]string{"apiVersion"}, graph.HCV1},
		{[]string{"metadata", "uid"}, "u1"},
		{[]string{"metadata", "resourceVersion"}, "7"},
		{[]string{"metadata", "labels", "a"}, "b"},
		{[]string{"status", "systemHealthStatus"}, "healthy"},
		{[]string{"spec", "deployment", "nodePlacements", "infra", "nodeSelector", "infra"}, "true"},
		{[]string{"spec", "virtualization", "vmiCPUAllocationRatio"}, float64(4)},
		{[]string{"spec", "deployment", "applicationAwareConfig", "enable"}, true},
		{[]string{"spec", "storage", "persistentReservationConfiguration", "enabled"}, true},
		{[]string{"spec", "featureGates"}, []any{map[string]any{"name": "downwardMetrics"}}},
	}
	for _, c := range checks {
		if got := lookup(v1, c.path); !reflect.DeepEqual(normalise(got), normalise(c.want)) {
			t.Errorf("v1beta1→v1 %s = %#v, want %#v", strings.Join(c.path, "."), got, c.want)
		}
	}

	orig := decode(`
apiVersion: hco.kubevirt.io/v1
kind: HyperConverged
metadata: {name: kubevirt-hyperconverged, namespace: kubevirt-hyperconverged, annotations: {keep: me}}
spec:
  featureGates: [{name: template, state: Disabled}, {name: alignCPUs}]
  deployment: {deployNetworkResourcesInjector: false}
  observability: {allowedAlerts: [none]}
`)
	down, err := e.ConvertHyperConverged(orig, graph.HCV1Beta1)
	if err != nil {
		t.Fatal(err)
	}
	if got := lookup(down, []string{"spec", "featureGates", "alignCPUs"}); got != true {
		t.Errorf("v1→v1beta1 featureGates.alignCPUs = %v, want true", got)
	}
	if got, _ := lookup(down, []string{"metadata", "annotations", graph.V1OnlyFieldsAnnotation}).(string); !strings.Contains(got, "allowedAlerts") {
		t.Errorf("v1→v1beta1 keeps no observability in %s: %q", graph.V1OnlyFieldsAnnotation, got)
	}
	up, err := e.ConvertHyperConverged(down, graph.HCV1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][]string{
		{"spec", "deployment", "deployNetworkResourcesInjector"},
		{"spec", "observability"},
		{"metadata", "annotations"},
	} {
		if got, want := lookup(up, p), lookup(orig, p); !reflect.DeepEqual(normalise(got), normalise(want)) {
			t.Errorf("round trip %s = %#v, want %#v", strings.Join(p, "."), got, want)
		}
	}
	gates := lookup(up, []string{"spec", "featureGates"})
	if !reflect.DeepEqual(normalise(gates), normalise([]any{
		map[string]any{"name": "alignCPUs"}, map[string]any{"name": "template", "state": "Disabled"},
	})) {
		t.Errorf("round trip featureGates = %v, want alignCPUs enabled and template disabled", gates)
	}

	if _, err := e.ConvertHyperConverged(decode(`{apiVersion: hco.kubevirt.io/v2, kind: HyperConverged, metadata: {name: x}}`), graph.HCV1); err == nil {
		t.Error("converting from an unknown version succeeded")
	}
}

func lookup(m map[string]any, path []string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}
