package vmisupport

import (
	"fmt"
	"sort"
	"strings"
)

// FieldError is one VMI field converge cannot honour: Path is the field's
// JSON path in the VirtualMachineInstance, with list indexes
// (spec.domain.devices.disks[1].lun) or map keys
// (spec.domain.resources.requests[nvidia.com/gpu]), and Reason says why and,
// where there is one, what to use instead.
type FieldError struct {
	Path   string
	Reason string
}

// Error gives "path: reason".
func (e *FieldError) Error() string { return e.Path + ": " + e.Reason }

// FieldErrors are all the fields of one VMI that converge refuses, sorted
// by path. CheckSpec gives them; the domain translation
// (nodeplane/vm/domain.Build) returns them wrapped with the VMI's identity,
// so that a caller can both print one line and mark the VMI Failed with
// the exact fields; the VM validation webhook (operators/virt/vmadmission)
// names each in its denial.
type FieldErrors []*FieldError

// Error joins the field errors with "; ", in path order.
func (errs FieldErrors) Error() string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Add appends the FieldError at path whose reason is format formatted
// with args (fmt.Sprintf).
func (errs *FieldErrors) Add(path, format string, args ...any) {
	*errs = append(*errs, &FieldError{Path: path, Reason: fmt.Sprintf(format, args...)})
}

// Sorted sorts errs by path, stably and in place, and gives them.
func (errs FieldErrors) Sorted() FieldErrors {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
	return errs
}
