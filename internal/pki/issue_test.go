package pki_test

import (
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/pki"
)

// TestIssueServing issues a CA and serving certificates from it and checks
// that each verifies against the CA for every host it names, IP addresses
// as IP SANs, and that it never outlives its CA.
func TestIssueServing(t *testing.T) {
	now := time.Now()
	ca, err := pki.IssueCA("test-ca", now, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || !strings.HasPrefix(ca.Cert.Subject.CommonName, "test-ca@") || !ca.Cert.NotBefore.Before(now) {
		t.Fatalf("CA %+v: want a CA named test-ca@<unix time>, valid from before now", ca.Cert.Subject)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, tc := range []struct {
		name     string
		hosts    []string
		lifetime time.Duration
		notAfter time.Time
		err      string
	}{
		{"DNS and IP", []string{"svc.ns.svc", "10.0.0.5", "fd00::1"}, time.Hour, now.Add(time.Hour), ""},
		{"capped by the CA", []string{"node-a"}, 100 * time.Hour, ca.Cert.NotAfter, ""},
		{"no host", nil, time.Hour, time.Time{}, "webhookcert: a serving certificate needs at least one host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := pki.IssueServing(ca, tc.hosts, now, tc.lifetime)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("IssueServing error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if kp.Cert.Subject.CommonName != tc.hosts[0] || !kp.Cert.NotAfter.Equal(tc.notAfter.Truncate(time.Second)) {
				t.Errorf("CN %q, NotAfter %v; want %q, %v", kp.Cert.Subject.CommonName, kp.Cert.NotAfter, tc.hosts[0], tc.notAfter)
			}
			for _, h := range tc.hosts {
				opts := x509.VerifyOptions{Roots: roots, DNSName: h, CurrentTime: now}
				if _, err := kp.Cert.Verify(opts); err != nil {
					t.Errorf("host %s: %v", h, err)
				}
				if ip := net.ParseIP(h); ip != nil && len(kp.Cert.IPAddresses) == 0 {
					t.Errorf("host %s: no IP SAN", h)
				}
			}
			back, err := pki.ParseKeyPair(kp.CertPEM, kp.KeyPEM)
			if err != nil || !back.Cert.Equal(kp.Cert) {
				t.Errorf("ParseKeyPair of the issued PEM: %v", err)
			}
		})
	}
	if _, err := pki.ParseKeyPair([]byte("junk"), ca.KeyPEM); err == nil {
		t.Error("ParseKeyPair of junk: want an error")
	}
}
