package console

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/converge-dev/converge/webhookcert"
)

// ServingCert is the agent's console serving certificate: self-signed
// (a one-off CA that signs it is thrown away) and pinned by clients through
// its fingerprint rather than trusted through a CA.
type ServingCert struct {
	// TLS is the certificate chain (leaf only) and key for tls.Config.
	TLS tls.Certificate
	// SHA256 is the lowercase hex SHA-256 of the leaf's DER bytes, as
	// published in CertSHA256Annotation.
	SHA256 string
	// NotAfter is when the certificate expires.
	NotAfter time.Time
}

// NewServingCert takes the hosts the certificate names (DNS names or IP
// addresses; at least one, the first is the common name), the current time
// and a lifetime, and gives a fresh ECDSA P-256 serving certificate issued
// with webhookcert (IssueCA, IssueServing). The agent makes one at every
// start, so a restart re-publishes a new fingerprint.
func NewServingCert(hosts []string, now time.Time, lifetime time.Duration) (*ServingCert, error) {
	ca, err := webhookcert.IssueCA("converge-node-console-ca", now, lifetime)
	if err != nil {
		return nil, fmt.Errorf("console serving certificate: %w", err)
	}
	kp, err := webhookcert.IssueServing(ca, hosts, now, lifetime)
	if err != nil {
		return nil, fmt.Errorf("console serving certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("console serving certificate: %w", err)
	}
	return &ServingCert{TLS: pair, SHA256: Fingerprint(kp.Cert), NotAfter: kp.Cert.NotAfter}, nil
}

// Fingerprint gives the lowercase hex SHA-256 of a certificate's DER bytes.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}
