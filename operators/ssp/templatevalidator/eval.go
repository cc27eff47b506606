package templatevalidator

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Upstream's errors for a rule that cannot be applied
// (validation/eval.go, specialized.go).
var (
	ErrUnrecognizedRuleType = errors.New("unrecognized Rule type")
	ErrDuplicateRuleName    = errors.New("duplicate Rule Name")
	ErrMissingRequiredKey   = errors.New("missing required key")
	ErrNoValuesFound        = errors.New("no values were found")
)

// Report is the outcome of one rule (upstream ValidationReport).
type Report struct {
	Rule *Rule
	// Skipped: its valid path is not on the VM.
	Skipped bool
	// Satisfied: applied and met.
	Satisfied bool
	// Message says what was found (upstream's wording), e.g. "value
	// 1073741824 is lower than minimum [2147483648]".
	Message string
	// Err: the rule could not be applied (malformed, path not found,
	// wrong type); such a rule fails, justWarning or not.
	Err error
}

// Result is the outcome of all the rules on one VM.
type Result struct {
	Reports []Report
	failed  bool
}

// Succeeded reports whether the VM may be admitted: no rule failed to
// apply and every rule not met is justWarning.
func (r *Result) Succeeded() bool { return !r.failed }

// text gives a report's `<rule message>: <what>`.
func (rep *Report) text() string {
	if rep.Err != nil {
		return fmt.Sprintf("%s: %v", rep.Rule.Message, rep.Err)
	}
	return fmt.Sprintf("%s: %s", rep.Rule.Message, rep.Message)
}

// failing reports whether rep becomes a cause of a denial.
func (rep *Report) failing() bool {
	return rep.Err != nil || (!rep.Skipped && !rep.Satisfied)
}

// Causes gives nil when the result succeeded, else one cause per rule
// that failed or was not met, justWarning ones included (as upstream
// Result.ToStatusCauses does): type FieldValueInvalid, field the rule's
// path (".spec.domain..."), message `<rule message>: <what>`.
func (r *Result) Causes() []metav1.StatusCause {
	if !r.failed {
		return nil
	}
	var causes []metav1.StatusCause
	for i := range r.Reports {
		if rep := &r.Reports[i]; rep.failing() {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid,
				Field: rep.Rule.Path.Expr(), Message: rep.text()})
		}
	}
	return causes
}

// Message gives the denial message: the causes' messages joined by ", "
// (upstream webhooks/utils.go ToAdmissionResponse); "" when the result
// succeeded.
func (r *Result) Message() string {
	var msgs []string
	for _, c := range r.Causes() {
		msgs = append(msgs, c.Message)
	}
	return strings.Join(msgs, ", ")
}

// Warnings gives `<rule message>: <what>` for each justWarning rule that
// applied and was not met. Upstream only logs these; converge answers
// them as admission warnings (kubectl prints them).
func (r *Result) Warnings() []string {
	var ws []string
	for i := range r.Reports {
		if rep := &r.Reports[i]; rep.Rule.JustWarning && rep.Err == nil && !rep.Skipped && !rep.Satisfied {
			ws = append(ws, rep.text())
		}
	}
	return ws
}

// Evaluate applies every rule to vm, in order, and gives the result
// (upstream Evaluator.Evaluate): a rule whose name repeats an earlier
// one's, whose type is unknown, or without message or path fails; a rule
// whose valid path is not on vm is skipped; the others are applied, their
// paths read from vm or, where vm lacks them, from ReferenceVM. vm is
// not modified; before evaluation a copy gets 1 for CPU sockets, cores
// and threads left 0 when spec.template.spec.domain.cpu is set (upstream
// webhooks/admission.go setDefaultValues).
func Evaluate(rules []Rule, vm *kubevirtv1.VirtualMachine) *Result {
	vm = vm.DeepCopy()
	setDefaultValues(vm)
	ref := ReferenceVM()
	res := &Result{}
	names := map[string]bool{}
	for i := range rules {
		r := &rules[i]
		fail := func(err error) {
			res.Reports = append(res.Reports, Report{Rule: r, Err: err})
			res.failed = true
		}
		if names[r.Name] {
			fail(ErrDuplicateRuleName)
			continue
		}
		names[r.Name] = true
		switch {
		case !r.Rule.IsValid():
			fail(ErrUnrecognizedRuleType)
			continue
		case r.Message == "" || r.Path == nil:
			fail(ErrMissingRequiredKey)
			continue
		}
		if r.Valid != nil {
			if vals, err := r.Valid.find(vm); err != nil || len(vals) == 0 {
				res.Reports = append(res.Reports, Report{Rule: r, Skipped: true})
				continue
			}
		}
		ok, msg, err := apply(r, vm, ref)
		if err != nil {
			fail(err)
			continue
		}
		res.Reports = append(res.Reports, Report{Rule: r, Satisfied: ok, Message: msg})
		if !ok && !r.JustWarning {
			res.failed = true
		}
	}
	return res
}

// setDefaultValues sets CPU sockets, cores and threads left 0 to 1 when
// the VM has a CPU section.
func setDefaultValues(vm *kubevirtv1.VirtualMachine) {
	if vm.Spec.Template == nil || vm.Spec.Template.Spec.Domain.CPU == nil {
		return
	}
	cpu := vm.Spec.Template.Spec.Domain.CPU
	for _, v := range []*uint32{&cpu.Sockets, &cpu.Cores, &cpu.Threads} {
		if *v == 0 {
			*v = 1
		}
	}
}
