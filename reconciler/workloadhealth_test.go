package reconciler_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler"
)

func fromYAML(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestWorkloadHealth judges VMs, VMIs and DataVolumes as their
// controllers leave them. A VM is healthy when it runs as its run
// strategy says — Ready, or stopped for Halted, Manual (stopped) and
// spec.running: false — unlike Argo CD's check before argo-cd #29664,
// which never found a Halted VM Healthy.
func TestWorkloadHealth(t *testing.T) {
	const vm = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: vm, namespace: vms, generation: 2}\n"
	const vmi = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: vmi, namespace: vms}\n"
	const dv = "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata: {name: dv, namespace: vms}\n"
	ready := "conditions: [{type: Ready, status: 'True'}]"
	for _, tc := range []struct {
		name, rule, obj string
		want            reconciler.Health
		msg             string // substring of the message
	}{
		{"VM Always, Ready", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Always}\nstatus: {observedGeneration: 2, created: true, ready: true, printableStatus: Running, " + ready + "}", reconciler.Healthy, ""},
		{"VM Always, starting", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Always}\nstatus: {observedGeneration: 2, created: true, printableStatus: Starting, conditions: [{type: Ready, status: 'False', reason: NotReady, message: 'VMI not running yet'}]}", reconciler.Progressing, "Starting: VMI not running yet (runStrategy Always: waiting for Ready)"},
		{"VM Always, no status yet", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Always}", reconciler.Progressing, "no status yet"},
		{"VM running: true, ready", graph.HealthVirtualMachine, vm + "spec: {running: true}\nstatus: {" + ready + "}", reconciler.Healthy, ""},
		{"VM Halted, stopped", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Halted}\nstatus: {observedGeneration: 2, printableStatus: Stopped}", reconciler.Healthy, ""},
		{"VM Halted, no status at all", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Halted}", reconciler.Healthy, ""},
		{"VM Halted, still running", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Halted}\nstatus: {observedGeneration: 2, created: true, printableStatus: Stopping}", reconciler.Progressing, "Stopping (runStrategy Halted)"},
		{"VM running: false, stopped", graph.HealthVirtualMachine, vm + "spec: {running: false}\nstatus: {observedGeneration: 2, printableStatus: Stopped}", reconciler.Healthy, ""},
		{"VM with neither field is Halted", graph.HealthVirtualMachine, vm + "spec: {}\nstatus: {printableStatus: Stopped}", reconciler.Healthy, ""},
		{"VM Manual, no VMI", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Manual}\nstatus: {observedGeneration: 2, printableStatus: Stopped}", reconciler.Healthy, ""},
		{"VM Manual, started and ready", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Manual}\nstatus: {observedGeneration: 2, created: true, " + ready + "}", reconciler.Healthy, ""},
		{"VM Manual, starting", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Manual}\nstatus: {observedGeneration: 2, created: true, printableStatus: Starting}", reconciler.Progressing, "Starting"},
		{"VM Once, ended", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Once}\nstatus: {observedGeneration: 2, created: true, printableStatus: Stopped}", reconciler.Healthy, ""},
		{"VM Paused", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Always}\nstatus: {created: true, printableStatus: Paused, conditions: [{type: Paused, status: 'True'}, {type: Ready, status: 'False'}]}", reconciler.Healthy, ""},
		{"VM generation not observed", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Halted}\nstatus: {observedGeneration: 1, created: true, printableStatus: Running, " + ready + "}", reconciler.Progressing, "generation 2 not observed yet"},
		{"VM Failure condition", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Always}\nstatus: {conditions: [{type: Failure, status: 'True', reason: FailedCreate, message: 'VMI refused'}]}", reconciler.Failed, "Failure: FailedCreate: VMI refused"},
		{"VM unschedulable", graph.HealthVirtualMachine, vm + "spec: {runStrategy: Always}\nstatus: {created: true, printableStatus: ErrorUnschedulable, conditions: [{type: Ready, status: 'False', message: '0/1 nodes are available'}]}", reconciler.Failed, "ErrorUnschedulable: 0/1 nodes are available"},
		{"VM being deleted", graph.HealthVirtualMachine, strings.Replace(vm, "generation: 2", "generation: 2, deletionTimestamp: '2026-01-01T00:00:00Z'", 1), reconciler.Progressing, "Terminating"},

		{"VMI ready", graph.HealthVirtualMachineInstance, vmi + "status: {phase: Running, " + ready + "}", reconciler.Healthy, ""},
		{"VMI scheduling", graph.HealthVirtualMachineInstance, vmi + "status: {phase: Scheduling}", reconciler.Progressing, "Scheduling"},
		{"VMI succeeded", graph.HealthVirtualMachineInstance, vmi + "status: {phase: Succeeded}", reconciler.Healthy, ""},
		{"VMI failed", graph.HealthVirtualMachineInstance, vmi + "status: {phase: Failed, reason: Crashed}", reconciler.Failed, "Failed: Crashed"},

		{"DV no status", graph.HealthDataVolume, dv, reconciler.Progressing, "no status yet"},
		{"DV scheduled", graph.HealthDataVolume, dv + "status: {phase: ImportScheduled, progress: N/A}", reconciler.Progressing, "ImportScheduled"},
		{"DV importing", graph.HealthDataVolume, dv + "status: {phase: ImportInProgress, progress: 45.50%}", reconciler.Progressing, "ImportInProgress 45.50%"},
		{"DV import retrying", graph.HealthDataVolume, dv + "status: {phase: ImportInProgress, progress: 10.00%, conditions: [{type: Running, status: 'False', reason: Error, message: 'connection refused'}]}", reconciler.Progressing, "ImportInProgress 10.00%: Error: connection refused"},
		{"DV succeeded", graph.HealthDataVolume, dv + "status: {phase: Succeeded, progress: 100.0%}", reconciler.Healthy, ""},
		{"DV failed", graph.HealthDataVolume, dv + "status: {phase: Failed, conditions: [{type: Running, status: 'False', reason: Error, message: 'not a disk image'}]}", reconciler.Failed, "Failed: Error: not a disk image"},

		{"NAD exists", graph.HealthExists, "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: br}\n", reconciler.Healthy, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, msg := reconciler.WorkloadHealth(tc.rule, fromYAML(t, tc.obj))
			if h != tc.want || !strings.Contains(msg, tc.msg) || (tc.msg == "" && msg != "") {
				t.Errorf("= %s %q, want %s %q", h, msg, tc.want, tc.msg)
			}
		})
	}
	if h, msg := reconciler.WorkloadHealth(graph.HealthExists, nil); h != reconciler.Progressing || msg != "not found yet" {
		t.Errorf("not found: %s %q", h, msg)
	}
	for _, r := range []string{graph.HealthVirtualMachine, graph.HealthVirtualMachineInstance, graph.HealthDataVolume, graph.HealthExists} {
		if !reconciler.WorkloadRule(r) {
			t.Errorf("WorkloadRule(%q) = false", r)
		}
	}
	if reconciler.WorkloadRule(graph.HealthKstatus) {
		t.Error("kstatus is not a workload rule")
	}
}
