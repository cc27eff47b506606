// Package v1alpha1 is the converge.dev/v1alpha1 API: the Sync, one config
// repository driven into one target cluster. Its CRD is generated from the
// CUE definition #Sync (schema/sync.cue), like the HyperConverged's; these Go
// types mirror it for the controller and the CLI.
//
// +k8s:deepcopy-gen=package
// +groupName=converge.dev
package v1alpha1
