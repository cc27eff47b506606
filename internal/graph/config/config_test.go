package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"cuelang.org/go/cue/cuecontext"
)

const hc = `apiVersion: hco.kubevirt.io/v1beta1
kind: HyperConverged
metadata:
  name: kubevirt-hyperconverged
  namespace: kubevirt-hyperconverged
spec: {}
`

// TestLoad loads configs of several files and documents: the accepted
// kinds land in HyperConverged, HostPathProvisioner and Workloads (in file
// order, then document order); every refused document is named with
// file:line:col, and each refusal of a kind lists the accepted ones.
func TestLoad(t *testing.T) {
	ctx := cuecontext.New()
	for _, tc := range []struct {
		name  string
		files map[string]string
		// documents: true to use LoadDocuments (no HC required)
		documents bool
		// want are the workloads loaded, as "apiVersion/kind@file:line".
		want []string
		// wantErr are substrings of the error, each on its own line.
		wantErr []string
	}{
		{name: "HC only", files: map[string]string{"hc.yaml": hc}},
		{name: "every workload kind", files: map[string]string{"hc.yaml": hc, "vms.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: vms}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: a, namespace: vms}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: b, namespace: vms}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: c, namespace: vms}
`, "more.yaml": `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: br}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata: {name: it}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {name: cit}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachinePreference
metadata: {name: p}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata: {name: cp}
---
apiVersion: v1
kind: Secret
metadata: {name: s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
`}, want: []string{
			"k8s.cni.cncf.io/v1/NetworkAttachmentDefinition@more.yaml:1",
			"instancetype.kubevirt.io/v1beta1/VirtualMachineInstancetype@more.yaml:5",
			"instancetype.kubevirt.io/v1beta1/VirtualMachineClusterInstancetype@more.yaml:9",
			"instancetype.kubevirt.io/v1beta1/VirtualMachinePreference@more.yaml:13",
			"instancetype.kubevirt.io/v1beta1/VirtualMachineClusterPreference@more.yaml:17",
			"v1/Secret@more.yaml:21",
			"v1/ConfigMap@more.yaml:25",
			"v1/Namespace@vms.yaml:1",
			"kubevirt.io/v1/VirtualMachine@vms.yaml:5",
			"kubevirt.io/v1/VirtualMachineInstance@vms.yaml:9",
			"cdi.kubevirt.io/v1beta1/DataVolume@vms.yaml:13",
		}},
		{name: "workloads without HC", documents: true, files: map[string]string{"vm.yaml": `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: a}
`}, want: []string{"kubevirt.io/v1/VirtualMachine@vm.yaml:1"}},
		{name: "workloads need an HC", files: map[string]string{"vm.yaml": `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: a}
`}, wantErr: []string{"no HyperConverged"}},
		{name: "refused kinds, all of them", files: map[string]string{"hc.yaml": hc, "x.yaml": `apiVersion: pool.kubevirt.io/v1beta1
kind: VirtualMachinePool
metadata: {name: p}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
---
apiVersion: kubevirt.io/v1alpha3
kind: VirtualMachine
metadata: {name: old}
`}, wantErr: []string{
			`x.yaml:1:1: unsupported document apiVersion "pool.kubevirt.io/v1beta1" kind "VirtualMachinePool": a config holds a HyperConverged (hco.kubevirt.io/v1beta1 or v1), optionally a HostPathProvisioner (hostpathprovisioner.kubevirt.io/v1beta1), and workloads: kubevirt.io/v1 VirtualMachine, VirtualMachineInstance; cdi.kubevirt.io/v1beta1 DataVolume; k8s.cni.cncf.io/v1 NetworkAttachmentDefinition; instancetype.kubevirt.io/v1beta1 VirtualMachineInstancetype, VirtualMachineClusterInstancetype, VirtualMachinePreference, VirtualMachineClusterPreference; v1 Namespace, Secret, ConfigMap`,
			`x.yaml:5:1: unsupported document apiVersion "apps/v1" kind "Deployment"`,
			`x.yaml:9:1: unsupported document apiVersion "kubevirt.io/v1alpha3" kind "VirtualMachine"`,
		}},
		{name: "no kind", files: map[string]string{"hc.yaml": hc, "x.yaml": "metadata: {name: a}\n"},
			wantErr: []string{"x.yaml:1:1: a document without apiVersion or kind"}},
		{name: "not an object", files: map[string]string{"hc.yaml": hc, "x.yaml": "just text\n"},
			wantErr: []string{"x.yaml:1:1: a document is a string; expected an object with apiVersion and kind"}},
		{name: "second HC", files: map[string]string{"hc.yaml": hc, "hc2.yaml": hc},
			wantErr: []string{"hc2.yaml:1:1: a second HyperConverged (the first is at ", "hc.yaml:1:1"}},
		{name: "syntax error and a bad kind in another file", files: map[string]string{"hc.yaml": hc, "a.yaml": "kind: [\n", "b.yaml": "apiVersion: v1\nkind: Pod\n"},
			wantErr: []string{"a.yaml:", `b.yaml:1:1: unsupported document apiVersion "v1" kind "Pod"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			load := Load
			if tc.documents {
				load = LoadDocuments
			}
			cfg, err := load(ctx, dir)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("loaded; want an error with %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not contain %q:\n%v", w, err)
					}
				}
				if got, want := strings.Count(err.Error(), "\n")+1, len(tc.wantErr); strings.Contains(tc.name, "all of them") && got != want {
					t.Errorf("%d error lines, want %d", got, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range cfg.Workloads {
				p := d.Pos.Position()
				got = append(got, d.Kind.String()+"@"+filepath.Base(p.Filename)+":"+strconv.Itoa(p.Line))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("workloads:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if !tc.documents && !cfg.HyperConverged.Exists() {
				t.Error("no HyperConverged")
			}
		})
	}
}

// TestWorkloadKinds keeps the kinds' scope right: the graph defaults the
// namespace of namespaced kinds and refuses one on cluster-scoped kinds.
func TestWorkloadKinds(t *testing.T) {
	cluster := map[string]bool{"Namespace": true, "VirtualMachineClusterInstancetype": true, "VirtualMachineClusterPreference": true}
	for _, k := range WorkloadKinds {
		if k.Namespaced == cluster[k.Kind] {
			t.Errorf("%s: Namespaced = %v", k, k.Namespaced)
		}
		if got, ok := WorkloadKind(k.APIVersion, k.Kind); !ok || got != k {
			t.Errorf("WorkloadKind(%s) = %v, %v", k, got, ok)
		}
	}
	if _, ok := WorkloadKind("kubevirt.io/v1", "KubeVirt"); ok {
		t.Error("KubeVirt is not a workload kind")
	}
	if g := (Kind{APIVersion: "v1"}).Group(); g != "" {
		t.Errorf("core group %q", g)
	}
}
