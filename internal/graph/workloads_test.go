package graph_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/converge-dev/converge/internal/graph"
)

const workloadsHC = `apiVersion: hco.kubevirt.io/v1beta1
kind: HyperConverged
metadata:
  name: kubevirt-hyperconverged
  namespace: kubevirt-hyperconverged
spec: {}
`

// goodWorkloads is one workload of every kind, all of which converge runs.
const goodWorkloads = `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
  namespace: vms
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        devices:
          interfaces: [{name: default, bridge: {}}]
        resources: {requests: {memory: 64Mi}}
      networks: [{name: default, pod: {}}]
---
apiVersion: v1
kind: Namespace
metadata: {name: vms}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: once}
spec:
  domain:
    devices:
      interfaces: [{name: default, bridge: {}}]
    resources: {requests: {memory: 64Mi}}
  networks: [{name: default, pod: {}}]
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: disk, namespace: vms}
spec:
  source: {http: {url: "http://example.com/disk.img"}}
  storage: {resources: {requests: {storage: 1Gi}}}
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: br1, namespace: vms}
spec:
  config: '{"cniVersion": "0.3.1", "name": "br1", "type": "bridge", "bridge": "br1"}'
---
apiVersion: v1
kind: Secret
metadata: {name: userdata, namespace: vms}
stringData: {userdata: "#cloud-config"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: vms}
data: {a: b}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata: {name: small, namespace: vms}
spec: {cpu: {guest: 1}, memory: {guest: 128Mi}}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata: {name: virtio}
spec: {devices: {preferredDiskBus: virtio}}
`

// writeConfig writes files into a new directory and returns it.
func writeConfig(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRenderWorkloads renders a config holding a workload of every kind:
// they form the workloads component, after every other component (its
// stage is the last one), Namespaces first within it, a namespaced object
// without a namespace in DefaultWorkloadNamespace, and the workload kinds
// get their health rules.
func TestRenderWorkloads(t *testing.T) {
	e := newEngine(t)
	dir := writeConfig(t, map[string]string{"hc.yaml": workloadsHC, "workloads.yaml": goodWorkloads})
	cfg, err := e.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Render(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := r.Nodes[len(r.Nodes)-1]
	if last.Name != graph.WorkloadsComponent {
		t.Fatalf("last node %q, want %q", last.Name, graph.WorkloadsComponent)
	}
	var others []string
	for _, n := range r.Nodes[:len(r.Nodes)-1] {
		others = append(others, n.Name)
	}
	if len(last.DependsOn) != len(others) {
		t.Errorf("workloads depends on %v, want every other component %v", last.DependsOn, others)
	}
	st := r.Stages[len(r.Stages)-1]
	if !reflect.DeepEqual(st.Nodes, []string{graph.WorkloadsComponent}) {
		t.Errorf("last stage %q holds %v, want the workloads alone", st.Name, st.Nodes)
	}
	var got []string
	for _, o := range st.Objects {
		got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	want := []string{
		"Namespace /vms",
		"VirtualMachine vms/web",
		"VirtualMachineInstance default/once",
		"DataVolume vms/disk",
		"NetworkAttachmentDefinition vms/br1",
		"Secret vms/userdata",
		"ConfigMap vms/settings",
		"VirtualMachineInstancetype vms/small",
		"VirtualMachineClusterPreference /virtio",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("workloads stage:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for kind, rule := range map[string]string{
		"VirtualMachine": graph.HealthVirtualMachine, "VirtualMachineInstance": graph.HealthVirtualMachineInstance,
		"DataVolume": graph.HealthDataVolume, "NetworkAttachmentDefinition": graph.HealthExists,
		"VirtualMachineClusterPreference": graph.HealthExists, "Secret": graph.HealthKstatus, "Namespace": graph.HealthKstatus,
	} {
		if got := r.HealthRule(kind); got != rule {
			t.Errorf("health rule of %s = %q, want %q", kind, got, rule)
		}
	}
	for _, o := range st.Objects {
		if _, ok := o.Object["status"]; ok {
			t.Errorf("%s %s carries a status", o.GetKind(), o.GetName())
		}
	}

	// Without workloads there is no workloads component.
	plain, err := e.LoadConfig(writeConfig(t, map[string]string{"hc.yaml": workloadsHC}))
	if err != nil {
		t.Fatal(err)
	}
	r, err = e.Render(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.Nodes {
		if n.Name == graph.WorkloadsComponent {
			t.Error("a config without workloads has a workloads component")
		}
	}
}

// TestRenderRefusesWorkloads: a workload the cluster would refuse, or
// that converge would run differently from what it says, fails the
// render (so nothing is applied), each problem on a line naming
// file:line:col, the object and the field path.
func TestRenderRefusesWorkloads(t *testing.T) {
	e := newEngine(t)
	for _, tc := range []struct {
		name string
		doc  string
		want []string // lines after "<dir>/w.yaml:"
	}{
		{"VM field converge does not run", `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: gpu}
spec:
  template:
    spec:
      domain:
        devices:
          gpus: [{name: g, deviceName: nvidia.com/X}]
`, []string{"9:11: VirtualMachine default/gpu: spec.template.spec.domain.devices.gpus: not supported by converge"}},
		{"VM field of the wrong type", `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: x}
spec:
  runStrategy: 5
`, []string{"5:3: VirtualMachine default/x: spec.runStrategy: a number where the API has a v1.VirtualMachineRunStrategy"}},
		{"misspelt VM field outside the template", `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: x}
spec:
  runStrategyy: Halted
  template: {spec: {domain: {devices: {}}}}
`, []string{"5:3: VirtualMachine default/x: spec.runStrategyy: unknown field: not in the kubevirt.io/v1 API (misspelt?)"}},
		{"obsolete CPU model", `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: old}
spec:
  domain:
    cpu: {model: "486"}
    devices: {}
`, []string{`6:11: VirtualMachineInstance default/old: spec.domain.cpu.model: CPU model "486" is obsolete`}},
		{"DataVolume source converge does not import", `apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: reg, namespace: vms}
spec:
  source:
    s3: {url: "s3://bucket/disk.img"}
  storage: {resources: {requests: {storage: 1Gi}}}
`, []string{"6:5: DataVolume vms/reg: spec.source.s3: not supported by converge; expected one of spec.source.http, spec.source.registry, spec.source.pvc, spec.source.blank, spec.source.upload or spec.sourceRef"}},
		{"DataVolume without a size", `apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: nosize}
spec:
  source: {blank: {}}
  storage: {}
`, []string{"6:3: DataVolume default/nosize: spec.storage.resources.requests.storage: is missing; expected a size such as 10Gi"}},
		{"dataVolumeTemplates get the DataVolume checks", `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: x}
spec:
  dataVolumeTemplates:
  - metadata: {name: d}
    spec:
      source: {pvc: {namespace: images}}
      storage: {resources: {requests: {storage: 1Gi}}}
  template: {spec: {domain: {devices: {disks: [{name: d}]}}, volumes: [{name: d, dataVolume: {name: d}}]}}
`, []string{`8:7: VirtualMachine default/x: spec.dataVolumeTemplates[0].spec.source: spec.source.pvc.name: empty; expected the name of the PVC to clone`}},
		{"dataVolumeTemplates without size: the DataVolume controller's check", `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: x}
spec:
  dataVolumeTemplates:
  - metadata: {name: d}
    spec:
      source: {blank: {}}
      storage: {}
  template: {spec: {domain: {devices: {disks: [{name: d}]}}, volumes: [{name: d, dataVolume: {name: d}}]}}
`, []string{"9:7: VirtualMachine default/x: spec.dataVolumeTemplates[0].spec.storage.resources.requests.storage: is missing; expected a size such as 10Gi"}},
		{"an instancetype matcher admission refuses", `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: x}
spec:
  instancetype: {kind: VirtualMachineSize, name: u1.large}
  template: {spec: {domain: {devices: {}}}}
`, []string{"5:18: VirtualMachine default/x: spec.instancetype.kind: got unexpected kind in InstancetypeMatcher: VirtualMachineSize"}},
		{"NAD whose config libcni refuses", `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: br}
spec:
  config: '{"name": "br"}'
`, []string{"5:3: NetworkAttachmentDefinition default/br: spec.config: CNI configuration of br: error parsing configuration: missing 'type'"}},
		{"NAD without config", `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: br}
spec: {}
`, []string{"4:1: NetworkAttachmentDefinition default/br: spec.config: empty: converge's node agent takes the CNI configuration from spec.config"}},
		{"namespace on a cluster-scoped kind", `apiVersion: v1
kind: Namespace
metadata: {name: vms, namespace: default}
`, []string{"3:23: Namespace default/vms: metadata.namespace: Namespace is cluster-scoped: remove metadata.namespace"}},
		{"bad names", `apiVersion: v1
kind: Secret
metadata: {name: Bad_Name, namespace: Also-Bad}
`, []string{
			`3:12: Secret Also-Bad/Bad_Name: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain`,
			`3:28: Secret Also-Bad/Bad_Name: metadata.namespace: Invalid value: "Also-Bad": a lowercase RFC 1123 label`,
		}},
		{"no name", `apiVersion: v1
kind: ConfigMap
metadata: {generateName: cm-}
`, []string{"3:1: ConfigMap default/(no name): metadata.name: Required value: name or generateName is required"}},
		{"exported from a cluster", `apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  resourceVersion: "42"
  creationTimestamp: "2026-01-01T00:00:00Z"
status: {phase: x}
`, []string{
			"5:3: ConfigMap default/cm: metadata.resourceVersion: written by the API server",
			"6:3: ConfigMap default/cm: metadata.creationTimestamp: written by the API server",
			"7:1: ConfigMap default/cm: status: written by the controllers, never applied",
		}},
		{"declared twice", `apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: default}
`, []string{"5:1: ConfigMap default/cm: declared a second time (the first is at "}},
		{"an object the stack derives", `apiVersion: v1
kind: Namespace
metadata: {name: kubevirt-hyperconverged}
`, []string{"1:1: Namespace kubevirt-hyperconverged: the hco component derives this object from the HyperConverged"}},
		{"every bad document is reported", `apiVersion: v1
kind: Secret
metadata: {name: a}
data: {x: 1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b}
dat: {}
`, []string{
			"4:1: Secret default/a: data: a number where the API has a []uint8",
			"9:1: ConfigMap default/b: dat: unknown field",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeConfig(t, map[string]string{"hc.yaml": workloadsHC, "w.yaml": tc.doc})
			cfg, err := e.LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			r, err := e.Render(cfg, nil)
			if err == nil {
				t.Fatalf("rendered %d stages; want the render refused", len(r.Stages))
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%d lines, want %d:\n%v", len(lines), len(tc.want), err)
			}
			prefix := filepath.Join(dir, "w.yaml") + ":"
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], prefix+w) {
					t.Errorf("line %d:\n%s\nwant it to start with\n%s", i, lines[i], prefix+w)
				}
			}
		})
	}
}

func newEngine(t *testing.T) *graph.Engine {
	t.Helper()
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	return e
}
