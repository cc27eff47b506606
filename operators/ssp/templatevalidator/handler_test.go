package templatevalidator_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	tv "github.com/converge-dev/converge/operators/ssp/templatevalidator"
)

// templates is a client.Reader of Templates: by key, or err for every Get.
type templates struct {
	byKey map[string]map[string]string // key → annotations
	err   error
	gets  int
}

func (r *templates) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	if u, ok := obj.(*unstructured.Unstructured); !ok || u.GroupVersionKind() != tv.TemplateGVK {
		return errors.New("want an unstructured Template")
	}
	if r.err != nil {
		return r.err
	}
	ann, ok := r.byKey[key.String()]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: "template.openshift.io", Resource: "templates"}, key.Name)
	}
	obj.SetAnnotations(ann)
	return nil
}

func (r *templates) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not implemented")
}

// vmDoc gives a VM's JSON with metadata fields meta (JSON members, may be
// empty) and template spec spec.
func vmDoc(meta, spec string) string {
	if meta != "" {
		meta = "," + meta
	}
	return `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"v","namespace":"default"` + meta + `},` +
		`"spec":{"runStrategy":"Halted","template":{"spec":` + spec + `}}}`
}

const fromTemplate = `"labels":{"vm.kubevirt.io/template":"rhel9","vm.kubevirt.io/template.namespace":"openshift"}`

func request(op admissionv1.Operation, doc string) ctrladmission.Request {
	return ctrladmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "default", Name: "v",
		Kind: metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"}, Object: runtime.RawExtension{Raw: []byte(doc)}}}
}

// TestHandle: where the rules come from and what the handler answers.
func TestHandle(t *testing.T) {
	tmpl := &templates{byKey: map[string]map[string]string{"openshift/rhel9": {"validations": memRule("")}}}
	warn := &templates{byKey: map[string]map[string]string{"openshift/rhel9": {"validations": memRule(`,"justWarning":true`)}}}
	bad := &templates{byKey: map[string]map[string]string{"openshift/rhel9": {"validations": `[{"name":"m","path":"spec.x","rule":"integer","message":"m"}]`}}}
	noAPI := &templates{err: &meta.NoKindMatchError{GroupKind: tv.TemplateGVK.GroupKind(), SearchedVersions: []string{"v1"}}}
	broken := &templates{err: errors.New("connection refused")}
	const denial = "This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]"
	for _, c := range []struct {
		name     string
		r        *templates
		op       admissionv1.Operation
		doc      string
		allowed  bool
		code     int32
		msg      string // substring of the result's message
		warnings []string
	}{
		{"template rule broken", tmpl, admissionv1.Create, vmDoc(fromTemplate, mem1Gi), false, 422, denial, nil},
		{"template rule kept", tmpl, admissionv1.Create, vmDoc(fromTemplate, mem4Gi), true, 200, "", nil},
		{"update checked too", tmpl, admissionv1.Update, vmDoc(fromTemplate, mem1Gi), false, 422, denial, nil},
		{"delete not checked", tmpl, admissionv1.Delete, vmDoc(fromTemplate, mem1Gi), true, 200, "", nil},
		{"being deleted", tmpl, admissionv1.Update, vmDoc(fromTemplate+`,"deletionTimestamp":"2026-01-01T00:00:00Z"`, mem1Gi), true, 200, "", nil},
		{"template from annotations", tmpl, admissionv1.Create,
			vmDoc(`"annotations":{"vm.kubevirt.io/template":"rhel9","vm.kubevirt.io/template-namespace":"openshift"}`, mem1Gi), false, 422, denial, nil},
		{"labels win over annotations", tmpl, admissionv1.Create,
			vmDoc(`"labels":{"vm.kubevirt.io/template":"other","vm.kubevirt.io/template.namespace":"openshift"},"annotations":{"vm.kubevirt.io/template":"rhel9","vm.kubevirt.io/template.namespace":"openshift"}`, mem1Gi), true, 200, "", nil},
		{"no template namespace: no template", tmpl, admissionv1.Create, vmDoc(`"labels":{"vm.kubevirt.io/template":"rhel9"}`, mem1Gi), true, 200, "", nil},
		{"template missing", tmpl, admissionv1.Create,
			vmDoc(`"labels":{"vm.kubevirt.io/template":"gone","vm.kubevirt.io/template.namespace":"openshift"}`, mem1Gi), true, 200, "", nil},
		{"no Template API", noAPI, admissionv1.Create, vmDoc(fromTemplate, mem1Gi), true, 200, "", nil},
		{"Template unreadable", broken, admissionv1.Create, vmDoc(fromTemplate, mem1Gi), false, 500,
			"VirtualMachine default/v: reading Template openshift/rhel9: connection refused", nil},
		{"VM's own rules replace the template's", tmpl, admissionv1.Create,
			vmDoc(fromTemplate+`,"annotations":{"vm.kubevirt.io/validations":"[{\"name\":\"c\",\"path\":\"jsonpath::.spec.domain.cpu.cores\",\"rule\":\"integer\",\"message\":\"cores\",\"max\":2}]"}`, mem1Gi), true, 200, "", nil},
		{"VM's own rules without template", noAPI, admissionv1.Create,
			vmDoc(`"annotations":{"vm.kubevirt.io/validations":"[{\"name\":\"c\",\"path\":\"jsonpath::.spec.domain.cpu.cores\",\"rule\":\"integer\",\"message\":\"cores\",\"max\":2}]"}`, cpu4), false, 422,
			"cores: value 4 is higher than maximum [2]", nil},
		{"empty VM annotation: the template's", tmpl, admissionv1.Create,
			vmDoc(fromTemplate+`,"annotations":{"vm.kubevirt.io/validations":""}`, mem1Gi), false, 422, denial, nil},
		{"skip-validations", tmpl, admissionv1.Create, vmDoc(fromTemplate+`,"annotations":{"vm.kubevirt.io/skip-validations":""}`, mem1Gi), true, 200, "", nil},
		{"justWarning", warn, admissionv1.Create, vmDoc(fromTemplate, mem1Gi), true, 200, "", []string{denial}},
		{"malformed template rules", bad, admissionv1.Create, vmDoc(fromTemplate, mem4Gi), false, 400,
			`VirtualMachine default/v: the validation rules of Template openshift/rhel9: rule 0 "m": path: invalid JSONPath "spec.x"`, nil},
		{"malformed VM rules", noAPI, admissionv1.Create, vmDoc(`"annotations":{"vm.kubevirt.io/validations":"[{"}`, mem4Gi), false, 400,
			"VirtualMachine default/v: the validation rules of annotation vm.kubevirt.io/validations: not a JSON list of rules", nil},
		{"not a VM", tmpl, admissionv1.Create, `{"spec":{"template":7}}`, false, 400, "VirtualMachine default/v: decoding", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := tv.Validator{Templates: c.r}.Handle(context.Background(), request(c.op, c.doc))
			if resp.Allowed != c.allowed {
				t.Errorf("allowed %v, want %v (%+v)", resp.Allowed, c.allowed, resp.Result)
			}
			if resp.Result.Code != c.code {
				t.Errorf("code %d, want %d", resp.Result.Code, c.code)
			}
			if !strings.Contains(resp.Result.Message, c.msg) {
				t.Errorf("message %q\nwant it to contain %q", resp.Result.Message, c.msg)
			}
			if !reflect.DeepEqual(resp.Warnings, c.warnings) {
				t.Errorf("warnings %q, want %q", resp.Warnings, c.warnings)
			}
		})
	}
	// a nil reader: no Template API
	if resp := (tv.Validator{}).Handle(context.Background(), request(admissionv1.Create, vmDoc(fromTemplate, mem1Gi))); !resp.Allowed {
		t.Errorf("nil Templates: %+v", resp.Result)
	}
	// a denial carries upstream's reason and causes
	resp := tv.Validator{Templates: tmpl}.Handle(context.Background(), request(admissionv1.Create, vmDoc(fromTemplate, mem1Gi)))
	if resp.Result.Reason != metav1.StatusReasonInvalid || resp.Result.Code != http.StatusUnprocessableEntity ||
		len(resp.Result.Details.Causes) != 1 || resp.Result.Details.Causes[0].Field != ".spec.domain.resources.requests.memory" {
		t.Errorf("denial %+v", resp.Result)
	}
}
