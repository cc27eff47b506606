package virtoperator

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

func TestConfigOf(t *testing.T) {
	kv := func(conf map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
			"metadata": map[string]any{"name": "kv", "namespace": "ns"}, "spec": map[string]any{"configuration": conf}}}
	}
	for _, tc := range []struct {
		name    string
		cr      *unstructured.Unstructured
		want    Config
		wantErr bool
	}{
		{name: "unset: KubeVirt's defaults", cr: kv(map[string]any{}), want: DefaultConfig()},
		{name: "HCO's defaults", cr: kv(map[string]any{
			"developerConfiguration": map[string]any{"cpuAllocationRatio": int64(10), "memoryOvercommit": int64(100)},
			"obsoleteCPUModels":      map[string]any{"486": true, "qemu64": true, "Skylake": false},
		}), want: Config{Ratios: scheduler.Ratios{CPUAllocationRatio: 10, MemoryOvercommit: 100}, ObsoleteCPUModels: map[string]bool{"486": true, "qemu64": true}}},
		{name: "ratios", cr: kv(map[string]any{"developerConfiguration": map[string]any{"cpuAllocationRatio": int64(4), "memoryOvercommit": int64(150)}}),
			want: Config{Ratios: scheduler.Ratios{CPUAllocationRatio: 4, MemoryOvercommit: 150}}},
		{name: "not a KubeVirt", cr: kv(map[string]any{"developerConfiguration": "x"}), want: DefaultConfig(), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigOf(tc.cr)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ConfigOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestImageRegistry(t *testing.T) {
	for ref, want := range map[string]string{
		"ghcr.io/converge-dev/converge-node:v1":       "ghcr.io/converge-dev",
		"registry.local:5000/a/b/converge-node:dev":   "registry.local:5000/a/b",
		"ghcr.io/converge-dev/converge-node@sha256:0": "ghcr.io/converge-dev",
		"converge-node:dev":                           "",
	} {
		if got := imageRegistry(ref); got != want {
			t.Errorf("imageRegistry(%q) = %q, want %q", ref, got, want)
		}
	}
}
