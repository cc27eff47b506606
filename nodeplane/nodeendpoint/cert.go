package nodeendpoint

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/converge-dev/converge/internal/webhook"
)

// ServingCert is an agent's serving certificate: self-signed (a one-off CA
// that signs it is thrown away) and pinned by clients through its
// fingerprint rather than trusted through a CA.
type ServingCert struct {
	// TLS is the certificate chain (leaf only) and key for tls.Config.
	TLS tls.Certificate
	// SHA256 is the lowercase hex SHA-256 of the leaf's DER bytes, as
	// published in Service.CertSHA256Annotation.
	SHA256 string
	// NotAfter is when the certificate expires.
	NotAfter time.Time
}

// NewServingCert takes the hosts the certificate names (DNS names or IP
// addresses; at least one, the first is the common name), the current time
// and a lifetime, and gives a fresh ECDSA P-256 serving certificate issued
// with webhookcert (IssueCA "converge-node-<Name>-ca", IssueServing).
// Agents make one at every start, so a restart re-publishes a new
// fingerprint. Errors start "<Name> serving certificate: ".
func (s Service) NewServingCert(hosts []string, now time.Time, lifetime time.Duration) (*ServingCert, error) {
	ca, err := webhook.IssueCA("converge-node-"+s.Name+"-ca", now, lifetime)
	if err != nil {
		return nil, fmt.Errorf("%s serving certificate: %w", s.Name, err)
	}
	kp, err := webhook.IssueServing(ca, hosts, now, lifetime)
	if err != nil {
		return nil, fmt.Errorf("%s serving certificate: %w", s.Name, err)
	}
	pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s serving certificate: %w", s.Name, err)
	}
	return &ServingCert{TLS: pair, SHA256: Fingerprint(kp.Cert), NotAfter: kp.Cert.NotAfter}, nil
}

// Fingerprint gives the lowercase hex SHA-256 of a certificate's DER bytes.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// ClientTLS gives the client tls.Config (TLS 1.2 or later) that accepts
// only the server leaf certificate whose Fingerprint is pin, or any
// certificate when insecure. A mismatch fails the handshake with an
// error naming both fingerprints and s.CertSHA256Annotation.
func (s Service) ClientTLS(pin string, insecure bool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// the chain is not verified against a CA: the leaf is pinned
		InsecureSkipVerify: true, //nolint:gosec // VerifyPeerCertificate pins the leaf
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if insecure {
				return nil
			}
			if len(raw) == 0 {
				return errors.New("no server certificate")
			}
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			if got := Fingerprint(c); got != pin {
				return fmt.Errorf("certificate SHA-256 %s is not the pinned %s (the agent restarted? read the Node's %s again)", got, pin, s.CertSHA256Annotation)
			}
			return nil
		},
	}
}
