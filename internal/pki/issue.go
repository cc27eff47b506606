package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// clockSkew backdates NotBefore so that a certificate issued now is already
// valid for an API server whose clock is slightly behind ours.
const clockSkew = 5 * time.Minute

// KeyPair is a certificate with its private key, parsed and PEM-encoded.
type KeyPair struct {
	// Cert is the parsed certificate.
	Cert *x509.Certificate
	// Key is the private key of Cert.
	Key crypto.Signer
	// CertPEM and KeyPEM are Cert and Key PEM-encoded, as stored.
	CertPEM, KeyPEM []byte
}

// IssueCA takes a common name, the current time and a lifetime, and gives
// a new self-signed CA (ECDSA P-256) valid from now (backdated by a few
// minutes of clock skew) until now+lifetime. It follows the self-signed
// CA of KubeVirt pkg/certificates/triple (NewCA), which HCO's certConfig
// configures, with a random serial number.
func IssueCA(commonName string, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("webhookcert: generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", commonName, now.Unix())},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, tmpl, key, key)
}

// IssueServing takes a CA, the hosts to cover (DNS names or IP addresses;
// the first is the common name), the current time and a lifetime, and
// gives a new serving certificate (ECDSA P-256, server auth) signed by ca,
// valid until now+lifetime or the CA's own expiry, whichever is first (a
// certificate cannot outlive the CA that vouches for it). It follows
// KubeVirt pkg/certificates/triple (NewServerKeyPair).
func IssueServing(ca *KeyPair, hosts []string, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("webhookcert: a serving certificate needs at least one host")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return issueLeaf(ca, tmpl, now, lifetime)
}

// ParseKeyPair takes PEM-encoded certificate and key, as stored in a
// Secret, and gives the parsed pair; it fails when either does not parse.
// Only the first certificate of certPEM is kept, as KubeVirt's
// LoadCertificates (virt-operator components/secrets.go) takes the leaf.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, err
	}
	k, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("webhookcert: private key of type %T cannot sign", k)
	}
	return &KeyPair{Cert: certs[0], Key: signer, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("webhookcert: signing certificate: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("webhookcert: parsing issued certificate: %w", err)
	}
	certPEM, err := cert.EncodeCertificates(c)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: c, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

func randomSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("webhookcert: generating serial number: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil // RFC 5280: positive
}

// IssueClient takes a CA, a user name (the common name), its groups (the
// organizations), the current time and a lifetime, and gives a client
// certificate (ECDSA P-256, client auth) signed by ca, as the API server
// reads a user from it (x509 authentication: CN the user, O the groups),
// valid until now+lifetime or the CA's own expiry, whichever is first.
func IssueClient(ca *KeyPair, user string, groups []string, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	return issueLeaf(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now, lifetime)
}

// issueLeaf completes tmpl (its subject, extended key usage and names set
// by the caller) with a new ECDSA P-256 key, a random serial, digital
// signature usage and a validity from now (less the clock skew) to
// now+lifetime or the CA's own expiry, whichever is first (a certificate
// cannot outlive the CA that vouches for it), and signs it with ca.
func issueLeaf(ca *KeyPair, tmpl *x509.Certificate, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generating key: %w", err)
	}
	if tmpl.SerialNumber, err = randomSerial(); err != nil {
		return nil, err
	}
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-clockSkew), now.Add(lifetime)
	if ca.Cert.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	tmpl.KeyUsage, tmpl.BasicConstraintsValid = x509.KeyUsageDigitalSignature, true
	return sign(tmpl, ca.Cert, key, ca.Key)
}
