// Package macpool is converge's kubemacpool: a cluster-wide pool of MAC
// addresses for KubeVirt VirtualMachine NICs, allocated from the
// NetworkAddonsConfig spec.kubeMacPool range by a mutating admission
// webhook. It follows upstream kubemacpool (k8snetworkplumbingwg/
// kubemacpool pkg/pool-manager and pkg/webhook/virtualmachine) and
// cluster-network-addons-operator's random default range.
//
// The pieces: MAC and Range (parsing, the random range), Pool (the
// in-memory table, safe for concurrent use), Controller (rebuilds the
// Pool from the VirtualMachines and a ConfigMap of in-flight
// reservations, follows VirtualMachine changes, serves the webhook),
// Webhook (the MutatingWebhookConfiguration, registered through
// internal/webhook, whose certificate Manager injects its caBundle and
// issues the serving certificate) and Setup (the pool's lifecycle in
// converge-controller: start with the NetworkAddonsConfig, restart on a
// range change).
package macpool
