// Package templatevalidator is SSP's template validator as a validating
// admission webhook of converge-controller: a kubevirt.io/v1
// VirtualMachine created from a template (labels, else annotations,
// vm.kubevirt.io/template and vm.kubevirt.io/template.namespace) is
// checked against the rules of the template's `validations` annotation,
// or of its own vm.kubevirt.io/validations annotation, which replaces
// them. A VM breaking a rule is refused with SSP's message, one
// `<rule message>: <what failed>` per rule joined by ", " (for example
// "This VM requires more memory.: value 1073741824 is lower than minimum
// [2147483648]"); a rule marked justWarning that is not met is answered
// with a warning instead. Deleting a common template (labelled
// template.kubevirt.io/type, with a `validations` annotation) that a VM
// still validates against is refused with SSP's message
// (TemplateDeletion).
//
// It follows kubevirt/ssp-operator internal/template-validator
// (validation/{rules,eval,specialized}.go, validation/path/*.go,
// kubevirtjobs/*.go, labels/labels.go, webhooks/{hook,uplink,admission,
// utils}.go; e918359d, Apache-2.0): rules are evaluated with client-go's
// JSONPath on the typed VM, a path the VM lacks is read from a fully
// allocated zero-value VM, a malformed rule refuses every VM of the
// template. The Template (template.openshift.io/v1) is read as
// unstructured: a missing Template, or no Template API at all (plain
// Kubernetes), admits the VM, as upstream does for a VM without a parent
// template. Where converge differs from upstream it says so at the
// identifier.
package templatevalidator
