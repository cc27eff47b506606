package nodeendpoint

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
)

// Fingerprint gives the lowercase hex SHA-256 of a certificate's DER bytes,
// the value of a Service's CertSHA256Annotation.
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
