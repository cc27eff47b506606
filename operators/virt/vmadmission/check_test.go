package vmadmission_test

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// vmJSON gives a VirtualMachine named ns/name whose template spec is
// templateSpec (JSON).
func vmJSON(name, templateSpec string) string {
	return `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"namespace":"default","name":"` + name + `"},` +
		`"spec":{"runStrategy":"Halted","template":{"spec":` + templateSpec + `}}}`
}

func vmiJSON(name, spec string) string {
	return `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"namespace":"default","name":"` + name + `"},"spec":` + spec + `}`
}

const (
	okSpec  = `{"domain":{"devices":{"interfaces":[{"name":"default","bridge":{}}]},"resources":{"requests":{"memory":"64Mi"}}},"networks":[{"name":"default","pod":{}}]}`
	gpuSpec = `{"domain":{"devices":{"gpus":[{"name":"g","deviceName":"nvidia.com/X"}],"disks":[{"name":"d","lun":{}}]}},"volumes":[{"name":"d","hostDisk":{"path":"/x","type":"Disk"}}]}`
	typo    = `{"domain":{"devices":{"gpu":[]},"resources":{}}}`
)

// oldCPU gives okSpec with spec.domain.cpu.model.
func oldCPU(model string) string {
	return strings.Replace(okSpec, `{"domain":{`, `{"domain":{"cpu":{"model":"`+model+`"},`, 1)
}

// TestCheck: what each kind of object gives, with paths from its root.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, kind, obj string
		want            []string // "path: reason" prefixes, in order
		wantErr         string
	}{
		{"supported VM", vmadmission.VirtualMachineKind, vmJSON("web", okSpec), nil, ""},
		{"VM without template", vmadmission.VirtualMachineKind, `{"metadata":{"name":"x"},"spec":{}}`, nil, ""},
		{"rejected VM fields", vmadmission.VirtualMachineKind, vmJSON("web", gpuSpec), []string{
			"spec.template.spec.domain.devices.disks[0].lun: not supported by converge (no SCSI passthrough)",
			"spec.template.spec.domain.devices.gpus: not supported by converge",
		}, ""},
		{"misspelt VM field", vmadmission.VirtualMachineKind, vmJSON("web", typo), []string{
			"spec.template.spec.domain.devices.gpu: " + vmadmission.UnknownFieldReason,
		}, ""},
		{"unknown field outside the template is not ours", vmadmission.VirtualMachineKind,
			`{"metadata":{"name":"x"},"spec":{"foo":1,"template":{"spec":{}}}}`, nil, ""},
		{"rejected VMI field", vmadmission.VirtualMachineInstanceKind, vmiJSON("i", gpuSpec), []string{
			"spec.domain.devices.disks[0].lun: not supported",
			"spec.domain.devices.gpus: not supported by converge",
		}, ""},
		{"misspelt VMI field", vmadmission.VirtualMachineInstanceKind, vmiJSON("i", typo), []string{
			"spec.domain.devices.gpu: unknown field",
		}, ""},
		{"wrong type", vmadmission.VirtualMachineInstanceKind, vmiJSON("i", `{"domain":{"devices":{"disks":"x"}}}`), nil, "decoding the VirtualMachineInstance"},
		{"other kind", "Pod", `{}`, nil, `kind "Pod"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs, err := vmadmission.Check(c.kind, []byte(c.obj))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(errs) != len(c.want) {
				t.Fatalf("got %d field errors %v, want %d: %q", len(errs), errs, len(c.want), c.want)
			}
			for i, e := range errs {
				if !strings.HasPrefix(e.Error(), c.want[i]) {
					t.Errorf("field error %d is %q, want it to start with %q", i, e.Error(), c.want[i])
				}
			}
		})
	}
}

// TestHandle: the admission decisions on requests built by hand (the
// API-server test shows the same through kube-apiserver).
func TestHandle(t *testing.T) {
	req := func(op admissionv1.Operation, kind, name, obj, old string) ctrladmission.Request {
		r := admissionv1.AdmissionRequest{Operation: op, Kind: metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: kind},
			Namespace: "default", Name: name, Object: runtime.RawExtension{Raw: []byte(obj)}}
		if old != "" {
			r.OldObject = runtime.RawExtension{Raw: []byte(old)}
		}
		return ctrladmission.Request{AdmissionRequest: r}
	}
	vm, vmi := vmadmission.VirtualMachineKind, vmadmission.VirtualMachineInstanceKind
	stopped := strings.Replace(vmJSON("web", gpuSpec), `"Halted"`, `"Always"`, 1)
	for _, c := range []struct {
		name    string
		req     ctrladmission.Request
		allowed bool
		message string // the whole denial, or the start of an error
	}{
		{"create supported", req(admissionv1.Create, vm, "web", vmJSON("web", okSpec), ""), true, ""},
		{"create rejected", req(admissionv1.Create, vm, "web", vmJSON("web", gpuSpec), ""), false,
			"VirtualMachine default/web: spec.template.spec.domain.devices.disks[0].lun: not supported by converge (no SCSI passthrough)\n" +
				"VirtualMachine default/web: spec.template.spec.domain.devices.gpus: not supported by converge"},
		{"create with generateName", req(admissionv1.Create, vm, "", strings.Replace(vmJSON("", typo), `"name":""`, `"generateName":"web-"`, 1), ""), false,
			"VirtualMachine default/web-*: spec.template.spec.domain.devices.gpu: " + vmadmission.UnknownFieldReason},
		{"update keeping the spec", req(admissionv1.Update, vm, "web", stopped, vmJSON("web", gpuSpec)), true, ""},
		{"update adding a rejected field", req(admissionv1.Update, vm, "web", vmJSON("web", gpuSpec), vmJSON("web", okSpec)), false,
			"VirtualMachine default/web: spec.template.spec.domain.devices.disks[0].lun"},
		{"delete", req(admissionv1.Delete, vm, "web", "", vmJSON("web", gpuSpec)), true, ""},
		{"VMI create rejected", req(admissionv1.Create, vmi, "i", vmiJSON("i", gpuSpec), ""), false,
			"VirtualMachineInstance default/i: spec.domain.devices.disks[0].lun"},
		{"VMI undecodable", req(admissionv1.Create, vmi, "i", `{"spec":`, ""), false, "VirtualMachineInstance default/i: decoding"},
		// KubeVirt's spec.configuration.obsoleteCPUModels (those set true).
		{"VM with an obsolete CPU model", req(admissionv1.Create, vm, "web", vmJSON("web", oldCPU("qemu64")), ""), false,
			`VirtualMachine default/web: spec.template.spec.domain.cpu.model: CPU model "qemu64" is obsolete (KubeVirt spec.configuration.obsoleteCPUModels)`},
		{"VMI with an obsolete CPU model", req(admissionv1.Create, vmi, "i", vmiJSON("i", oldCPU("486")), ""), false,
			`VirtualMachineInstance default/i: spec.domain.cpu.model: CPU model "486" is obsolete`},
		{"a model the configuration marks false is allowed", req(admissionv1.Create, vmi, "i", vmiJSON("i", oldCPU("pentium")), ""), true, ""},
		{"a current model is allowed", req(admissionv1.Create, vmi, "i", vmiJSON("i", oldCPU("Skylake-Server")), ""), true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := vmadmission.Validator{ObsoleteCPUModels: func() map[string]bool {
				return map[string]bool{"qemu64": true, "486": true, "pentium": false}
			}}
			resp := v.Handle(context.Background(), c.req)
			if resp.Allowed != c.allowed {
				t.Fatalf("allowed %v (%+v), want %v", resp.Allowed, resp.Result, c.allowed)
			}
			if c.message != "" && !strings.HasPrefix(resp.Result.Message, c.message) {
				t.Errorf("message %q, want it to start with %q", resp.Result.Message, c.message)
			}
		})
	}
}
