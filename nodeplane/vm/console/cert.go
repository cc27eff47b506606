package console

import (
	"crypto/x509"
	"time"

	"github.com/converge-dev/converge/nodeplane/nodeendpoint"
)

// ServingCert is the agent's console serving certificate, self-signed and
// pinned by fingerprint (nodeendpoint.ServingCert).
type ServingCert = nodeendpoint.ServingCert

// NewServingCert gives a fresh console serving certificate for hosts (at
// least one; the first is the common name), valid from now for lifetime
// (nodeendpoint.Service.NewServingCert).
func NewServingCert(hosts []string, now time.Time, lifetime time.Duration) (*ServingCert, error) {
	return Service.NewServingCert(hosts, now, lifetime)
}

// Fingerprint gives the lowercase hex SHA-256 of a certificate's DER bytes
// (nodeendpoint.Fingerprint).
func Fingerprint(c *x509.Certificate) string { return nodeendpoint.Fingerprint(c) }
