package templatevalidator_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	tv "github.com/converge-dev/converge/operators/ssp/templatevalidator"
)

// vm decodes a VirtualMachine whose spec.template.spec is spec (JSON).
func vm(t *testing.T, spec string) *kubevirtv1.VirtualMachine {
	t.Helper()
	v := &kubevirtv1.VirtualMachine{}
	doc := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"v","namespace":"default"},"spec":{"template":{"spec":` + spec + `}}}`
	if err := json.Unmarshal([]byte(doc), v); err != nil {
		t.Fatal(err)
	}
	return v
}

const (
	mem1Gi    = `{"domain":{"resources":{"requests":{"memory":"1Gi"}},"devices":{}}}`
	mem4Gi    = `{"domain":{"resources":{"requests":{"memory":"4Gi"}},"devices":{}}}`
	cpu4      = `{"domain":{"cpu":{"cores":4},"devices":{}}}`
	virtio    = `{"domain":{"devices":{"disks":[{"name":"root","disk":{"bus":"virtio"}},{"name":"data","disk":{"bus":"virtio"}}]}}}`
	mixedBus  = `{"domain":{"devices":{"disks":[{"name":"root","disk":{"bus":"virtio"}},{"name":"data","disk":{"bus":"sata"}}]}}}`
	withModel = `{"domain":{"cpu":{"model":"Haswell-noTSX"},"devices":{}}}`
	noDomain  = `{"domain":{"devices":{}}}`
	guestMem  = `{"domain":{"memory":{"guest":"2Gi"},"devices":{}}}`
)

// memRule is the common templates' kind of memory rule.
func memRule(extra string) string {
	return `[{"name":"minimal-required-memory","path":"jsonpath::.spec.domain.resources.requests.memory","rule":"integer","message":"This VM requires more memory.","min":2147483648` + extra + `}]`
}

// TestEvaluate: rule outcomes and upstream's messages.
func TestEvaluate(t *testing.T) {
	for _, c := range []struct {
		name, rules, spec string
		ok                bool     // admitted
		msg               string   // the denial message ("" when admitted)
		warnings          []string // nil: none
	}{
		{"int below min as quantity", memRule(""), mem1Gi, false,
			"This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]", nil},
		{"int within min", memRule(""), mem4Gi, true, "", nil},
		{"int above max", memRule(`,"max":3221225472`), mem4Gi, false,
			"This VM requires more memory.: value 4294967296 is higher than maximum [3221225472]", nil},
		{"int max only", `[{"name":"c","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"Too many cores","max":2}]`, cpu4, false,
			"Too many cores: value 4 is higher than maximum [2]", nil},
		{"int bound from a path", `[{"name":"c","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"cores","max":"jsonpath::.spec.domain.cpu.sockets"}]`, cpu4, false,
			"cores: value 4 is higher than maximum [1]", nil},
		{"CPU defaults: threads 0 counts as 1", `[{"name":"t","path":"jsonpath::.spec.domain.cpu.threads","rule":"integer","message":"threads","min":1}]`, cpu4, true, "", nil},
		{"absent pointer read from the reference VM as 0", `[{"name":"g","path":"jsonpath::.spec.domain.memory.guest","rule":"integer","message":"guest memory","min":1}]`, noDomain, false,
			"guest memory: value 0 is lower than minimum [1]", nil},
		{"guest memory quantity", `[{"name":"g","path":"jsonpath::.spec.domain.memory.guest","rule":"integer","message":"guest memory","min":1073741824}]`, guestMem, true, "", nil},
		{"absent map key not found anywhere", memRule(""), noDomain, false,
			"This VM requires more memory.: invalid JSONPath .spec.domain.resources.requests.memory: memory is not found", nil},
		{"valid path absent: skipped", memRule(`,"valid":"jsonpath::.spec.domain.resources.requests.memory"`), noDomain, true, "", nil},
		{"valid path present: applied", memRule(`,"valid":"jsonpath::.spec.domain.resources.requests.memory"`), mem1Gi, false,
			"This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]", nil},
		{"enum met", `[{"name":"bus","path":"jsonpath::.spec.domain.devices.disks[*].disk.bus","rule":"enum","message":"virtio disks only","values":["virtio","scsi"]}]`, virtio, true, "", nil},
		{"enum not met", `[{"name":"bus","path":"jsonpath::.spec.domain.devices.disks[*].disk.bus","rule":"enum","message":"virtio disks only","values":["virtio"]}]`, mixedBus, false,
			"virtio disks only: Some of [virtio, sata] are not in [virtio]", nil},
		{"enum value from a path", `[{"name":"bus","path":"jsonpath::.spec.domain.devices.disks[*].disk.bus","rule":"enum","message":"same bus","values":["jsonpath::.spec.domain.devices.disks[0].disk.bus"]}]`, mixedBus, false,
			"same bus: Some of [virtio, sata] are not in [virtio]", nil},
		{"regex met", `[{"name":"model","path":"jsonpath::.spec.domain.cpu.model","rule":"regex","message":"Haswell only","regex":"^Haswell"}]`, withModel, true, "", nil},
		{"regex not met", `[{"name":"model","path":"jsonpath::.spec.domain.cpu.model","rule":"regex","message":"Skylake only","regex":"^Skylake"}]`, withModel, false,
			"Skylake only: Some of [Haswell-noTSX] do not match ^Skylake", nil},
		{"regex that does not compile", `[{"name":"model","path":"jsonpath::.spec.domain.cpu.model","rule":"regex","message":"m","regex":"("}]`, withModel, false,
			"m: error parsing regexp: missing closing ): `(`", nil},
		{"string length met", `[{"name":"n","path":"jsonpath::.spec.domain.devices.disks[*].name","rule":"string","message":"disk names","minLength":3,"maxLength":8}]`, virtio, true, "", nil},
		{"string too long", `[{"name":"n","path":"jsonpath::.spec.domain.devices.disks[*].name","rule":"string","message":"short disk names","maxLength":3}]`, virtio, false,
			"short disk names: Lengths of some strings are not in interval [N/A, 3]", nil},
		{"string too short", `[{"name":"n","path":"jsonpath::.spec.domain.cpu.model","rule":"string","message":"model","minLength":20}]`, withModel, false,
			"model: Lengths of some strings are not in interval [20, N/A]", nil},
		{"string rule on a number", `[{"name":"n","path":"jsonpath::.spec.domain.cpu.cores","rule":"string","message":"m","maxLength":3}]`, cpu4, false,
			"m: mismatching type: uint32, not string", nil},
		{"int rule on a string", `[{"name":"n","path":"jsonpath::.spec.domain.cpu.model","rule":"integer","message":"m","max":3}]`, withModel, false,
			"m: mismatching type: string, not int or resource.Quantity", nil},
		{"no values", `[{"name":"n","path":"jsonpath::.spec.domain.devices.disks[*].name","rule":"string","message":"m","maxLength":3}]`, noDomain, false,
			"m: no values were found", nil},
		{"justWarning not met: admitted with a warning", memRule(`,"justWarning":true`), mem1Gi, true, "",
			[]string{"This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]"}},
		{"justWarning met: no warning", memRule(`,"justWarning":true`), mem4Gi, true, "", nil},
		{"justWarning with a failing rule: both in the denial, as upstream", `[
			{"name":"w","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"few cores advised","max":2,"justWarning":true},
			{"name":"m","path":"jsonpath::.spec.domain.cpu.model","rule":"enum","message":"model","values":["host-model"]}]`,
			`{"domain":{"cpu":{"cores":4,"model":"Haswell"},"devices":{}}}`, false,
			"few cores advised: value 4 is higher than maximum [2], model: Some of [Haswell] are not in [host-model]",
			[]string{"few cores advised: value 4 is higher than maximum [2]"}},
		{"justWarning rule that cannot apply fails", `[{"name":"w","path":"jsonpath::.spec.domain.nothere","rule":"integer","message":"w","max":2,"justWarning":true}]`, cpu4, false,
			"w: invalid JSONPath .spec.domain.nothere: nothere is not found", nil},
		{"duplicate names", `[{"name":"a","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"a1","max":8},{"name":"a","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"a2","max":8}]`, cpu4, false,
			"a2: duplicate Rule Name", nil},
		{"unknown rule type", `[{"name":"a","path":"jsonpath::.spec.domain.cpu.cores","rule":"float","message":"a"}]`, cpu4, false,
			"a: unrecognized Rule type", nil},
		{"no message", `[{"name":"a","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer"}]`, cpu4, false,
			": missing required key", nil},
		{"no path", `[{"name":"a","rule":"integer","message":"a"}]`, cpu4, false, "a: missing required key", nil},
		{"every rule reported in order", `[
			{"name":"a","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"cores","max":2},
			{"name":"b","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"ok cores","min":1},
			{"name":"c","path":"jsonpath::.spec.domain.cpu.sockets","rule":"integer","message":"sockets","min":2}]`, cpu4, false,
			"cores: value 4 is higher than maximum [2], sockets: value 1 is lower than minimum [2]", nil},
		{"index past the VM's list read from the reference VM", `[{"name":"n","path":"jsonpath::.spec.domain.devices.disks[5].name","rule":"string","message":"sixth disk named","minLength":1}]`, virtio, false,
			"sixth disk named: Lengths of some strings are not in interval [1, N/A]", nil},
		{"bound with several values", `[{"name":"c","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"cores","max":"jsonpath::.spec.domain.devices.disks[*].bootOrder"}]`,
			`{"domain":{"cpu":{"cores":4},"devices":{"disks":[{"name":"a","bootOrder":1},{"name":"b","bootOrder":2}]}}}`, false,
			"cores: expected one value, found 2", nil},
		{"bound from an empty list: no values, not the reference VM's (as upstream)", `[{"name":"c","path":"jsonpath::.spec.domain.cpu.cores","rule":"integer","message":"cores","max":"jsonpath::.spec.domain.devices.disks[*].bootOrder"}]`, cpu4, false,
			"cores: expected one value, found 0", nil},
		{"every value checked", `[{"name":"b","path":"jsonpath::.spec.domain.devices.disks[*].bootOrder","rule":"integer","message":"boot order","max":1}]`,
			`{"domain":{"devices":{"disks":[{"name":"a","bootOrder":1},{"name":"b","bootOrder":2},{"name":"c","bootOrder":3}]}}}`, false,
			"boot order: value 2 is higher than maximum [1], value 3 is higher than maximum [1]", nil},
		{"no rules", `[]`, cpu4, true, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rules, err := tv.ParseRules(c.rules)
			if err != nil {
				t.Fatal(err)
			}
			v := vm(t, c.spec)
			before := v.DeepCopy()
			res := tv.Evaluate(rules, v)
			if res.Succeeded() != c.ok {
				t.Errorf("succeeded %v, want %v (%q)", res.Succeeded(), c.ok, res.Message())
			}
			if got := res.Message(); got != c.msg {
				t.Errorf("message\n got %q\nwant %q", got, c.msg)
			}
			if got := res.Warnings(); !reflect.DeepEqual(got, c.warnings) {
				t.Errorf("warnings\n got %q\nwant %q", got, c.warnings)
			}
			if !reflect.DeepEqual(v, before) {
				t.Error("Evaluate modified the VM")
			}
		})
	}
}

// TestReferenceVM: optional fields allocated, lists sized as upstream.
func TestReferenceVM(t *testing.T) {
	ref := tv.ReferenceVM()
	d := ref.Spec.Template.Spec.Domain
	if len(d.Devices.Disks) != 64 || len(d.Devices.Interfaces) != 64 || len(d.Devices.Interfaces[0].Ports) != 16 ||
		d.CPU == nil || d.Memory == nil || d.Memory.Guest == nil || d.Resources.Requests == nil {
		t.Fatalf("reference VM domain %+v", d)
	}
	if tv.ReferenceVM() != ref {
		t.Error("ReferenceVM built twice")
	}
}

// TestCauses: a denial's causes name each failing rule's path.
func TestCauses(t *testing.T) {
	rules, err := tv.ParseRules(memRule(""))
	if err != nil {
		t.Fatal(err)
	}
	causes := tv.Evaluate(rules, vm(t, mem1Gi)).Causes()
	if len(causes) != 1 || causes[0].Field != ".spec.domain.resources.requests.memory" || causes[0].Type != "FieldValueInvalid" {
		t.Fatalf("causes %+v", causes)
	}
}

// TestParseRules: malformed rules give an error naming the rule and key.
func TestParseRules(t *testing.T) {
	for _, c := range []struct{ name, rules, want string }{
		{"not a list", `{"name":"a"}`, "not a JSON list of rules"},
		{"not JSON", `[{"name":`, "not a JSON list of rules"},
		{"path without prefix", `[{"name":"m","path":".spec.domain.cpu.cores","rule":"integer","message":"m"}]`,
			`rule 0 "m": path: invalid JSONPath ".spec.domain.cpu.cores": want "jsonpath::" followed by a path`},
		{"path that does not parse", `[{"name":"a","path":"jsonpath::.spec.x","rule":"integer","message":"m"},{"name":"m","path":"jsonpath::.spec.domain.disks[","rule":"integer","message":"m"}]`,
			`rule 1 "m": path: invalid JSONPath "jsonpath::.spec.domain.disks[": unterminated array`},
		{"bad valid", `[{"name":"m","path":"jsonpath::.spec.x","valid":"spec.x","rule":"integer","message":"m"}]`, `rule 0 "m": valid: invalid JSONPath "spec.x"`},
		{"quantity as a bound", `[{"name":"m","path":"jsonpath::.spec.x","rule":"integer","message":"m","min":"2Gi"}]`, `rule 0 "m": min: invalid JSONPath "2Gi"`},
		{"bound of the wrong type", `[{"name":"m","path":"jsonpath::.spec.x","rule":"integer","message":"m","max":true}]`, `rule 0 "m": max: want a number or a "jsonpath::" path, got true`},
		{"bad value path", `[{"name":"m","path":"jsonpath::.spec.x","rule":"enum","message":"m","values":["a","jsonpath::{"]}]`, `rule 0 "m": values[1]: invalid JSONPath "jsonpath::{"`},
		{"value not a string", `[{"name":"m","path":"jsonpath::.spec.x","rule":"enum","message":"m","values":[1]}]`, `rule 0 "m": values[0]: json: cannot unmarshal number`},
		{"no name", `[{"path":7}]`, `rule 0: json: cannot unmarshal number`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := tv.ParseRules(c.rules)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
		})
	}
	if rules, err := tv.ParseRules(""); err != nil || rules != nil {
		t.Errorf("empty annotation: %v, %v", rules, err)
	}
	_, err := tv.ParseRules(`[{"name":"m","path":"x","rule":"integer","message":"m"}]`)
	if !errors.Is(err, tv.ErrInvalidJSONPath) {
		t.Errorf("error %v does not wrap ErrInvalidJSONPath", err)
	}
	rules, err := tv.ParseRules(`[{"name":"m","path":"jsonpath::$.spec.domain.cpu.cores","rule":"integer","message":"m","min":1.6,"unknown":1}]`)
	if err != nil || rules[0].Path.Expr() != ".spec.domain.cpu.cores" || rules[0].Min.Int != 2 {
		t.Errorf("rules %+v, %v", rules, err)
	}
}

// TestEvaluateConcurrently: requests share the reference VM (run with
// -race); each parses its own rules, whose paths are not safe to share.
func TestEvaluateConcurrently(t *testing.T) {
	v := vm(t, noDomain)
	done := make(chan string)
	for range 8 {
		go func() {
			rules, err := tv.ParseRules(`[{"name":"g","path":"jsonpath::.spec.domain.memory.guest","rule":"integer","message":"guest memory","min":1}]`)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- tv.Evaluate(rules, v).Message()
		}()
	}
	for range 8 {
		if got := <-done; got != "guest memory: value 0 is lower than minimum [1]" {
			t.Error(got)
		}
	}
}
