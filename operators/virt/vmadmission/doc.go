// Package vmadmission is the validating admission webhook that keeps
// kubevirt.io/v1 VirtualMachines and VirtualMachineInstances to the part of
// the VMI spec converge runs (api/vmisupport.SupportTable(),
// docs/vmi-support.md): a CREATE, or an UPDATE that changes the VMI spec
// (spec of a VMI, spec.template.spec of a VM), is refused with one line
// per offending field, each `<Kind> <namespace>/<name>: <path>: <reason>`,
// in the style of the hco-webhook (package hcowebhook). It plays the part
// of KubeVirt's virt-api validating webhooks
// (virtualmachine-validator.kubevirt.io and
// virtualmachineinstances-create-validator.kubevirt.io,
// pkg/virt-api/webhooks/validating-webhook), narrowed to what converge
// supports rather than what KubeVirt does.
//
// Fields outside the kubevirt.io/v1 API (a misspelt field kept by a CRD
// that preserves unknown fields) are refused too, where KubeVirt's typed
// decoding would drop them silently. converge-controller serves the
// webhook on its webhook server with the certificate of package
// internal/webhook and registers ConfigurationName once the VM CRDs exist.
package vmadmission
