// Package pki issues the self-signed certificates converge serves with: a
// one-off CA (IssueCA) and a serving certificate it signs (IssueServing),
// both ECDSA P-256, following KubeVirt's pkg/certificates/triple (NewCA,
// NewServerKeyPair), and parses a stored pair back (ParseKeyPair).
//
// Two users: the webhook certificate manager (internal/webhook), which
// keeps the CA and the serving pair in a Secret and rotates them, and the
// node endpoints (nodeplane/endpoint), which make a fresh pair at every
// agent start and pin the leaf by fingerprint. Errors keep the
// "webhookcert: " prefix the certificate manager has always reported.
package pki
