// Package pki issues the self-signed certificates converge serves with: a
// one-off CA (IssueCA) and a serving certificate it signs (IssueServing),
// both ECDSA P-256, following KubeVirt's pkg/certificates/triple (NewCA,
// NewServerKeyPair), a client certificate it signs (IssueClient), and
// parses a stored pair back (ParseKeyPair).
//
// Users: the webhook certificate manager (internal/webhook), which
// keeps the CA and the serving pair in a Secret and rotates them, the
// node endpoints (nodeplane/endpoint), which make a fresh pair at every
// agent start and pin the leaf by fingerprint, and the test control plane
// (internal/testing/controlplane: its users' client certificates and the
// aggregation layer's front proxy). Errors keep the
// "webhookcert: " prefix the certificate manager has always reported
// (IssueClient's say "pki: ").
package pki
