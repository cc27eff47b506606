package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"time"

	"github.com/converge-dev/converge/internal/pki"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/cert"
)

// Keys of the Secret's data besides tls.crt and tls.key (the serving
// certificate and key, as in every kubernetes.io/tls Secret).
const (
	// CACertKey holds the current CA certificate.
	CACertKey = "ca.crt"
	// CAKeyKey holds the current CA private key.
	CAKeyKey = "ca.key"
	// CABundleKey holds the CA bundle injected into the targets: the current
	// CA first, then the previous CAs that have not expired yet.
	CABundleKey = "ca-bundle.crt"
)

// maxBundle bounds the CA bundle, as KubeVirt's MergeCABundle does.
const maxBundle = 10

// Plan is the outcome of one check of the Secret's data (PlanSecret).
type Plan struct {
	// Data is the data the Secret must hold.
	Data map[string][]byte
	// Changed reports whether Data differs from the data checked.
	Changed bool
	// CARotated and ServingRotated report what was (re-)issued.
	CARotated, ServingRotated bool
	// Next is when the next certificate is due for renewal or the next
	// previous CA expires from the bundle.
	Next time.Time
}

// NeedsRotation takes a certificate, its renewBefore and the current time
// and reports whether it must be re-issued: from renewBefore ahead of its
// NotAfter on (HCO certConfig renewBefore, applied as KubeVirt's
// NextRotationDeadline does), or while it is not valid yet (the clock
// went back).
func NeedsRotation(c *x509.Certificate, renewBefore time.Duration, now time.Time) bool {
	return now.Before(c.NotBefore) || !now.Before(c.NotAfter.Add(-renewBefore))
}

// PlanSecret takes the Secret's current data (nil when it does not exist),
// the lifetimes, the CA name, the hosts to serve and the current time, and
// gives the data the Secret must hold. It keeps what is still good and
// issues only what is missing, unreadable or due: a new CA when the CA is
// within max(CARenewBefore, ServerRenewBefore) of its end (so that a
// serving certificate, which cannot outlive its CA, always gets its own
// renewBefore), and a new serving certificate when the CA changed, the
// hosts are not all covered, or it is within ServerRenewBefore of its
// end. A replaced CA stays in the bundle until it expires, so that
// servers still presenting a certificate it signed stay trusted (KubeVirt
// MergeCABundle keeps old CAs for the overlap in the same way).
func PlanSecret(data map[string][]byte, l Lifetimes, caName string, hosts []string, now time.Time) (Plan, error) {
	p := Plan{Data: map[string][]byte{}}
	caRenew := max(l.CARenewBefore, l.ServerRenewBefore)
	ca, err := pki.ParseKeyPair(data[CACertKey], data[CAKeyKey])
	if err != nil || !ca.Cert.IsCA || !matches(ca) || NeedsRotation(ca.Cert, caRenew, now) {
		if ca, err = pki.IssueCA(caName, now, l.CADuration); err != nil {
			return p, err
		}
		p.CARotated = true
	}
	serving, err := pki.ParseKeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if p.CARotated || err != nil || !servingOK(serving, ca, hosts, l.ServerRenewBefore, now) {
		if serving, err = pki.IssueServing(ca, hosts, now, l.ServerDuration); err != nil {
			return p, err
		}
		p.ServingRotated = true
	}
	bundle := []*x509.Certificate{ca.Cert}
	p.Next = earliest(ca.Cert.NotAfter.Add(-caRenew), serving.Cert.NotAfter.Add(-l.ServerRenewBefore))
	previous, _ := cert.ParseCertsPEM(data[CABundleKey]) // an unreadable bundle is rebuilt
	if p.CARotated {
		if old, err := pki.ParseKeyPair(data[CACertKey], data[CAKeyKey]); err == nil {
			previous = append([]*x509.Certificate{old.Cert}, previous...)
		}
	}
	for _, c := range previous {
		if len(bundle) == maxBundle || !c.IsCA || !now.Before(c.NotAfter) || contains(bundle, c) {
			continue
		}
		bundle = append(bundle, c)
		p.Next = earliest(p.Next, c.NotAfter)
	}
	bundlePEM, err := cert.EncodeCertificates(bundle...)
	if err != nil {
		return p, err
	}
	p.Data[CACertKey], p.Data[CAKeyKey] = ca.CertPEM, ca.KeyPEM
	p.Data[corev1.TLSCertKey], p.Data[corev1.TLSPrivateKeyKey] = serving.CertPEM, serving.KeyPEM
	p.Data[CABundleKey] = bundlePEM
	for k, v := range p.Data {
		if !bytes.Equal(data[k], v) {
			p.Changed = true
		}
	}
	return p, nil
}

// servingOK reports whether serving is a usable, current serving
// certificate: its key matches, ca signed it, it covers every host and it
// is not due for renewal.
func servingOK(serving, ca *pki.KeyPair, hosts []string, renewBefore time.Duration, now time.Time) bool {
	if !matches(serving) || serving.Cert.CheckSignatureFrom(ca.Cert) != nil || NeedsRotation(serving.Cert, renewBefore, now) {
		return false
	}
	for _, h := range hosts {
		if serving.Cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// matches reports whether the key pair's key belongs to its certificate.
func matches(kp *pki.KeyPair) bool {
	_, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	return err == nil
}

func contains(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, b := range certs {
		if b.Equal(c) {
			return true
		}
	}
	return false
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
