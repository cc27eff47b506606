package hcowebhook_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/hco/hcowebhook"
)

var (
	engineOnce sync.Once
	theEngine  *graph.Engine
	engineErr  error
)

// sharedEngine builds the engine once for the package (it takes seconds)
// and generates its CRDs, as the controller does before serving.
func sharedEngine(t *testing.T) *graph.Engine {
	t.Helper()
	engineOnce.Do(func() {
		if theEngine, engineErr = graph.NewEngine(); engineErr == nil {
			_, engineErr = theEngine.CRDs()
		}
	})
	if engineErr != nil {
		t.Fatal(engineErr)
	}
	return theEngine
}

const hcName = "HyperConverged kubevirt-hyperconverged/kubevirt-hyperconverged"

// hc gives a HyperConverged kubevirt-hyperconverged/kubevirt-hyperconverged
// of apiVersion hco.kubevirt.io/<version> as YAML, with extra appended
// under the top level (indented YAML).
func hc(version, extra string) string {
	return "apiVersion: hco.kubevirt.io/" + version + "\nkind: HyperConverged\n" +
		"metadata:\n  name: kubevirt-hyperconverged\n  namespace: kubevirt-hyperconverged\n" + extra
}

var (
	goodV1Beta1  = hc("v1beta1", "spec: {}\n")
	goodV1       = hc("v1", "spec: {}\n")
	badCAV1Beta1 = hc("v1beta1", "spec:\n  certConfig:\n    ca:\n      duration: 5m\n")
	badCAV1      = hc("v1", "spec:\n  security:\n    certConfig:\n      ca:\n        duration: 5m\n")
	badPatchV1   = hc("v1", "  annotations:\n    kubevirt.kubevirt.io/jsonpatch: '[{\"op\":\"add\",\"path\":\"/metadata/x\",\"value\":1}]'\nspec: {}\n")
	// A patch the schema accepts but that fails when applied to KubeVirt's
	// spec: only the derivation (Render) finds it.
	failingPatchV1 = hc("v1", "  annotations:\n    kubevirt.kubevirt.io/jsonpatch: '[{\"op\":\"remove\",\"path\":\"/spec/notThere\"}]'\nspec: {}\n")
)

// TestValidatorHandle calls the handler with admission requests and checks
// the decision; every denial must carry, for each line `converge vet`
// prints for the same object, that line's CUE path and message after the
// object's name instead of file:line:col.
func TestValidatorHandle(t *testing.T) {
	e := sharedEngine(t)
	for _, c := range []struct {
		name         string
		op           admissionv1.Operation
		obj, old     string
		facts        error
		wantAllowed  bool
		wantCode     int32  // 0: not checked
		wantContains string // in the message
		wantVetLines bool   // the message holds converge vet's lines for obj
		wantRender   bool   // the message holds converge render's lines for obj
		wantNoRender bool   // allowed without reading facts or rendering
		wantWarning  string // a warning of the response
	}{
		{name: "v1beta1 CREATE with a too short CA duration", op: admissionv1.Create, obj: badCAV1Beta1,
			wantContains: hcName + ": spec.certConfig.ca: duration (5m) must be at least 10m", wantVetLines: true},
		{name: "v1 CREATE with a too short CA duration", op: admissionv1.Create, obj: badCAV1,
			wantContains: hcName + ": spec.security.certConfig.ca: duration (5m) must be at least 10m", wantVetLines: true},
		{name: "v1 CREATE with a jsonpatch outside /spec/", op: admissionv1.Create, obj: badPatchV1,
			wantContains: hcName + ": metadata.annotations", wantVetLines: true},
		{name: "v1 CREATE with a jsonpatch that fails on KubeVirt's spec (found by the derivation)", op: admissionv1.Create, obj: failingPatchV1,
			wantContains: "invalid jsonPatch in the kubevirt.kubevirt.io/jsonpatch annotation", wantRender: true},
		{name: "v1 CREATE with an operators mode that is not one", op: admissionv1.Create,
			obj:          hc("v1", "  annotations: {converge.dev/operators: upstream}\nspec: {}\n"),
			wantContains: hcName + `: metadata.annotations: converge.dev/operators: "upstream" is not an operators mode; allowed: native`, wantVetLines: true},
		{name: "v1beta1 CREATE with AAQ in native mode (the default)", op: admissionv1.Create,
			obj:          hc("v1beta1", "spec: {enableApplicationAwareQuota: true}\n"),
			wantContains: "spec.deployment.applicationAwareConfig.enable (v1beta1: spec.enableApplicationAwareQuota): true asks for Application Aware Quota", wantRender: true},
		{name: "v1beta1 CREATE with AAQ in external mode", op: admissionv1.Create,
			obj: hc("v1beta1", "  annotations: {converge.dev/operators: external}\nspec: {enableApplicationAwareQuota: true}\n"), wantAllowed: true},
		{name: "v1beta1 CREATE of a valid object", op: admissionv1.Create, obj: goodV1Beta1, wantAllowed: true},
		{name: "v1 CREATE of a valid object", op: admissionv1.Create, obj: goodV1, wantAllowed: true},
		{name: "v1 CREATE with an unknown gate is allowed with HCO's warning", op: admissionv1.Create,
			obj: hc("v1", "spec:\n  featureGates: [{name: noSuchGate}]\n"), wantAllowed: true,
			wantWarning: "the noSuchGate featureGate is unknown and ignored."},
		{name: "CREATE: status is not validated", op: admissionv1.Create, obj: goodV1 + "status:\n  notAField: 1\n", wantAllowed: true},
		{name: "UPDATE changing neither spec nor annotations is not evaluated", op: admissionv1.Update,
			old: badCAV1, obj: strings.Replace(badCAV1, "  name:", "  labels: {a: b}\n  name:", 1), wantAllowed: true, wantNoRender: true},
		{name: "UPDATE making the spec invalid", op: admissionv1.Update, old: goodV1, obj: badCAV1,
			wantContains: hcName + ": spec.security.certConfig.ca: duration (5m) must be at least 10m", wantVetLines: true},
		{name: "UPDATE changing only annotations is evaluated", op: admissionv1.Update, old: goodV1, obj: badPatchV1,
			wantContains: "jsonpatch", wantVetLines: true},
		{name: "DELETE is allowed", op: admissionv1.Delete, old: badCAV1, wantAllowed: true, wantNoRender: true},
		{name: "CREATE of another kind", op: admissionv1.Create, obj: strings.Replace(goodV1, "kind: HyperConverged", "kind: Other", 1),
			wantContains: hcName + `: apiVersion "hco.kubevirt.io/v1" kind "Other" is not a HyperConverged`},
		{name: "facts that cannot be read refuse the request", op: admissionv1.Create, obj: goodV1, facts: errors.New("no nodes"),
			wantCode: 500, wantContains: "reading the cluster facts: no nodes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var factsCalls atomic.Int32
			v := &hcowebhook.Validator{Engine: e, Facts: func(context.Context) (map[string]any, error) {
				factsCalls.Add(1)
				return map[string]any{"platform": "kubernetes"}, c.facts
			}}
			resp := v.Handle(context.Background(), request(t, c.op, c.obj, c.old))
			msg := resp.Result.Message
			if resp.Allowed != c.wantAllowed {
				t.Fatalf("Allowed = %v, want %v; message:\n%s", resp.Allowed, c.wantAllowed, msg)
			}
			if c.wantWarning != "" && !slices.Contains(resp.Warnings, c.wantWarning) {
				t.Errorf("warnings = %q, want %q among them", resp.Warnings, c.wantWarning)
			}
			if c.wantWarning == "" && len(resp.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", resp.Warnings)
			}
			if c.wantCode != 0 && resp.Result.Code != c.wantCode {
				t.Errorf("code = %d, want %d", resp.Result.Code, c.wantCode)
			}
			if !strings.Contains(msg, c.wantContains) {
				t.Errorf("message does not contain %q:\n%s", c.wantContains, msg)
			}
			if c.wantVetLines || c.wantRender {
				for _, l := range cliLines(t, e, c.obj, c.wantRender) {
					if !strings.Contains(msg, hcName+": "+l) {
						t.Errorf("message lacks the CLI's %q:\n%s", l, msg)
					}
				}
			}
			if c.wantNoRender && factsCalls.Load() != 0 {
				t.Error("the object was evaluated")
			}
		})
	}
}

func request(t *testing.T, op admissionv1.Operation, obj, old string) ctrladmission.Request {
	t.Helper()
	r := ctrladmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid", Operation: op, Namespace: "kubevirt-hyperconverged", Name: "kubevirt-hyperconverged",
	}}
	for _, p := range []struct {
		yaml string
		raw  *runtime.RawExtension
	}{{obj, &r.Object}, {old, &r.OldObject}} {
		if p.yaml == "" {
			continue
		}
		b, err := yaml.YAMLToJSON([]byte(p.yaml))
		if err != nil {
			t.Fatal(err)
		}
		p.raw.Raw = b
	}
	return r
}

var filePos = regexp.MustCompile(`^[^:]*:\d+:\d+: `)

// cliLines writes obj to a file and gives the error lines `converge vet`
// (LoadConfig + Vet, as internal/cli) or, with derive, `converge render`
// (LoadConfig + Render) prints for it, without file:line:col.
func cliLines(t *testing.T, e *graph.Engine, obj string, derive bool) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hc.yaml")
	if err := os.WriteFile(path, []byte(obj), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := e.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if derive {
		_, err = e.Render(cfg, map[string]any{"platform": "kubernetes"})
	} else {
		err = e.Vet(cfg)
	}
	if err == nil {
		t.Fatal("the CLI finds no error")
	}
	lines := strings.Split(err.Error(), "\n")
	var ge *graph.Error
	if errors.As(err, &ge) {
		lines = ge.Lines
	}
	var out []string
	for _, l := range lines {
		out = append(out, filePos.ReplaceAllString(l, ""))
	}
	return out
}
