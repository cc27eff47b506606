// Package v1alpha1 is the converge.dev/v1alpha1 API: the Sync, one config
// repository driven into one target cluster. Its CRD is generated from the
// CUE definition #Sync (schema/sync.cue), like the HyperConverged's; these Go
// types mirror it for the controller and the CLI.
//
// It also holds the well-known labels and annotations through which
// converge's operators (converge-controller) and its node agents
// (converge-node) meet on Nodes and VMIs (wellknown_*.go): each says who
// writes it, who reads it and what it means. The two sides never import
// each other; they share only this package and the other contract
// packages under api/.
//
// +k8s:deepcopy-gen=package
// +groupName=converge.dev
package v1alpha1
