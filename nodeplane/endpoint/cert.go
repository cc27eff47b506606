package endpoint

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/internal/pki"
)

// ServingCert is an agent's serving certificate: self-signed (a one-off CA
// that signs it is thrown away) and pinned by clients through its
// fingerprint rather than trusted through a CA.
type ServingCert struct {
	// TLS is the certificate chain (leaf only) and key for tls.Config.
	TLS tls.Certificate
	// SHA256 is the lowercase hex SHA-256 of the leaf's DER bytes
	// (nodeendpoint.Fingerprint), as published in the Service's
	// CertSHA256Annotation.
	SHA256 string
	// NotAfter is when the certificate expires.
	NotAfter time.Time
}

// NewServingCert takes s, the hosts the certificate names (DNS names or IP
// addresses; at least one, the first is the common name), the current
// time and a lifetime, and gives a fresh ECDSA P-256 serving certificate
// issued with internal/pki (IssueCA "converge-node-<Name>-ca",
// IssueServing). Agents make one at every start, so a restart
// re-publishes a new fingerprint. Errors start "<Name> serving
// certificate: ".
func NewServingCert(s nodeendpoint.Service, hosts []string, now time.Time, lifetime time.Duration) (*ServingCert, error) {
	ca, err := pki.IssueCA("converge-node-"+s.Name+"-ca", now, lifetime)
	if err != nil {
		return nil, fmt.Errorf("%s serving certificate: %w", s.Name, err)
	}
	kp, err := pki.IssueServing(ca, hosts, now, lifetime)
	if err != nil {
		return nil, fmt.Errorf("%s serving certificate: %w", s.Name, err)
	}
	pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s serving certificate: %w", s.Name, err)
	}
	return &ServingCert{TLS: pair, SHA256: nodeendpoint.Fingerprint(kp.Cert), NotAfter: kp.Cert.NotAfter}, nil
}
