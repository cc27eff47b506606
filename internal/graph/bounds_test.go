package graph

import (
	"fmt"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/yaml"
)

func TestCheckListBounds(t *testing.T) {
	list := func(n int, f string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf(f, i)
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	const hc = "apiVersion: hco.kubevirt.io/v1beta1\nkind: HyperConverged\nmetadata: {name: kubevirt-hyperconverged}\n"
	const hcV1 = "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nmetadata: {name: kubevirt-hyperconverged}\n"
	const hpp = "apiVersion: hostpathprovisioner.kubevirt.io/v1beta1\nkind: HostPathProvisioner\nmetadata: {name: hostpath-provisioner}\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"set at its bound", hc + "spec: {storageImport: {insecureRegistries: " + list(256, "r%d") + "}}", ""},
		{"set over its bound", hc + "spec: {storageImport: {insecureRegistries: " + list(257, "r%d") + "}}",
			"x.yaml:4:44: spec.storageImport.insecureRegistries: 257 items, at most 256 allowed"},
		{"obsolete CPU models", hc + "spec:\n  obsoleteCPUs:\n    cpuModels: " + list(300, "m%d") + "\n",
			"spec.obsoleteCPUs.cpuModels: 300 items, at most 256 allowed"},
		{"v1 set over its bound", hcV1 + "spec: {virtualization: {obsoleteCPUModels: " + list(257, "m%d") + "}}",
			"spec.virtualization.obsoleteCPUModels: 257 items, at most 256 allowed"},
		{"HPP feature gates", hpp + "spec: {featureGates: " + list(1000, "g%d") + "}",
			"spec.featureGates: 1000 items, at most 256 allowed"},
		{"unbounded list of any length", hc + "spec: {infra: {nodePlacement: {tolerations: " + list(300, "{key: k%d}") + "}}}", ""},
		{"kind without a CRD", "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := yaml.Extract("x.yaml", []byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			v := cuecontext.New().BuildFile(f)
			if v.Kind() == cue.ListKind { // yaml.Extract of one document is the document
				t.Fatalf("unexpected stream")
			}
			err = checkListBounds(v)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
