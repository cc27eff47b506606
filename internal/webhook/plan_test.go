package webhook

import (
	"crypto/x509"
	"maps"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/pki"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/cert"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestPlanSecretLifecycle walks one Secret through its life on a fake
// clock: each step plans on the previous step's data and checks what was
// (re-)issued, the bundle, and that the result is a working chain.
func TestPlanSecretLifecycle(t *testing.T) {
	l := Lifetimes{CADuration: 48 * time.Hour, CARenewBefore: 12 * time.Hour, ServerDuration: 24 * time.Hour, ServerRenewBefore: 12 * time.Hour}
	hosts := []string{"svc.ns.svc", "127.0.0.1"}
	otherCA, err := pki.IssueCA("other", t0.Add(40*time.Hour), l.CADuration)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name                    string
		at                      time.Duration // after t0
		hosts                   []string
		mutate                  func(map[string][]byte)
		wantCA, wantServing     bool
		wantChanged             bool
		wantBundle              int
		wantNext                time.Duration // after t0; 0 = not checked
		wantSameCAAsPrevious    bool
		wantPreviousCAInBundles bool
	}{
		{name: "empty Secret: CA and serving certificate issued", wantCA: true, wantServing: true, wantChanged: true, wantBundle: 1, wantNext: 12 * time.Hour},
		{name: "nothing due: data unchanged", at: 11 * time.Hour, wantBundle: 1, wantNext: 12 * time.Hour, wantSameCAAsPrevious: true},
		{name: "serving certificate due at duration-renewBefore", at: 12 * time.Hour, wantServing: true, wantChanged: true, wantBundle: 1, wantNext: 24 * time.Hour, wantSameCAAsPrevious: true},
		{name: "a new host re-issues the serving certificate only", at: 13 * time.Hour, hosts: append([]string{"extra.example"}, hosts...), wantServing: true, wantChanged: true, wantBundle: 1, wantSameCAAsPrevious: true},
		{name: "CA due at duration-renewBefore: both re-issued, old CA kept in the bundle", at: 36 * time.Hour, wantCA: true, wantServing: true, wantChanged: true, wantBundle: 2, wantNext: 48 * time.Hour, wantPreviousCAInBundles: true},
		{name: "old CA expired: dropped from the bundle", at: 49 * time.Hour, wantServing: true, wantChanged: true, wantBundle: 1, wantSameCAAsPrevious: true},
		{name: "unreadable serving certificate: re-issued, CA kept", at: 50 * time.Hour, mutate: func(d map[string][]byte) { d[corev1.TLSCertKey] = []byte("garbage") }, wantServing: true, wantChanged: true, wantBundle: 1, wantSameCAAsPrevious: true},
		{name: "serving key of another certificate: re-issued", at: 50 * time.Hour, mutate: func(d map[string][]byte) { d[corev1.TLSPrivateKeyKey] = otherCA.KeyPEM }, wantServing: true, wantChanged: true, wantBundle: 1, wantSameCAAsPrevious: true},
		{name: "CA replaced by hand: serving certificate re-signed by it, bundle keeps the unexpired old CA", at: 50 * time.Hour, mutate: func(d map[string][]byte) { d[CACertKey], d[CAKeyKey] = otherCA.CertPEM, otherCA.KeyPEM }, wantServing: true, wantChanged: true, wantBundle: 2, wantSameCAAsPrevious: true},
	}
	var data map[string][]byte
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			in := maps.Clone(data)
			if in == nil {
				in = map[string][]byte{}
			}
			if s.mutate != nil {
				s.mutate(in)
			}
			h := hosts
			if s.hosts != nil {
				h = s.hosts
			}
			now := t0.Add(s.at)
			p, err := PlanSecret(in, l, "test-ca", h, now)
			if err != nil {
				t.Fatal(err)
			}
			if p.CARotated != s.wantCA || p.ServingRotated != s.wantServing || p.Changed != s.wantChanged {
				t.Errorf("CARotated, ServingRotated, Changed = %v, %v, %v; want %v, %v, %v",
					p.CARotated, p.ServingRotated, p.Changed, s.wantCA, s.wantServing, s.wantChanged)
			}
			if !p.Changed && !maps.EqualFunc(in, p.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Error("Changed is false but the data differs")
			}
			bundle, err := cert.ParseCertsPEM(p.Data[CABundleKey])
			if err != nil {
				t.Fatal(err)
			}
			if len(bundle) != s.wantBundle {
				t.Errorf("bundle holds %d CAs, want %d", len(bundle), s.wantBundle)
			}
			if s.wantNext != 0 && !p.Next.Equal(t0.Add(s.wantNext)) {
				t.Errorf("Next = %s, want t0+%s", p.Next, s.wantNext)
			}
			if s.wantSameCAAsPrevious && string(p.Data[CACertKey]) != string(in[CACertKey]) {
				t.Error("the CA changed")
			}
			if s.wantPreviousCAInBundles && !bundleHas(bundle, data[CACertKey]) {
				t.Error("the replaced CA is not in the bundle")
			}
			checkChain(t, p.Data, h, now)
			data = p.Data
		})
	}
}

// checkChain asserts that the serving certificate verifies against the
// bundle for every host at now, and does not outlive its CA.
func checkChain(t *testing.T, data map[string][]byte, hosts []string, now time.Time) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[CABundleKey]) {
		t.Fatal("empty bundle")
	}
	serving, err := pki.ParseKeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseKeyPair(data[CACertKey], data[CAKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if _, err := serving.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: h, CurrentTime: now}); err != nil {
			t.Errorf("serving certificate for %s: %v", h, err)
		}
	}
	if serving.Cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("serving certificate ends %s, after its CA (%s)", serving.Cert.NotAfter, ca.Cert.NotAfter)
	}
}

func bundleHas(bundle []*x509.Certificate, caPEM []byte) bool {
	c, err := cert.ParseCertsPEM(caPEM)
	if err != nil {
		return false
	}
	return contains(bundle, c[0])
}

// TestPlanSecretUnevenRenewBefore: a CA renewBefore shorter than the
// serving one must not make the serving certificate due as soon as it is
// issued (it cannot outlive its CA): the CA is renewed early instead.
func TestPlanSecretUnevenRenewBefore(t *testing.T) {
	l := Lifetimes{CADuration: 48 * time.Hour, CARenewBefore: time.Hour, ServerDuration: 24 * time.Hour, ServerRenewBefore: 12 * time.Hour}
	p, err := PlanSecret(nil, l, "ca", []string{"h"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{12 * time.Hour, 24 * time.Hour, 36 * time.Hour} {
		p, err = PlanSecret(p.Data, l, "ca", []string{"h"}, t0.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		again, err := PlanSecret(p.Data, l, "ca", []string{"h"}, t0.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		if again.Changed {
			t.Fatalf("at t0+%s a second plan right after the first re-issued again (CA %v, serving %v)", at, again.CARotated, again.ServingRotated)
		}
	}
}

func TestNeedsRotation(t *testing.T) {
	ca, err := pki.IssueCA("ca", t0, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{
		{0, false},
		{7*time.Hour + 59*time.Minute, false},
		{8 * time.Hour, true},
		{11 * time.Hour, true},
		{-time.Hour, true}, // before NotBefore (t0 minus the clock skew)
	} {
		if got := NeedsRotation(ca.Cert, 2*time.Hour, t0.Add(c.at)); got != c.want {
			t.Errorf("NeedsRotation at t0+%s = %v, want %v", c.at, got, c.want)
		}
	}
}

func TestLifetimesValidate(t *testing.T) {
	d := DefaultLifetimes()
	for _, c := range []struct {
		name    string
		mutate  func(*Lifetimes)
		wantErr bool
	}{
		{"HCO defaults", func(*Lifetimes) {}, false},
		{"renewBefore equal to duration", func(l *Lifetimes) { l.ServerRenewBefore = l.ServerDuration }, true},
		{"zero CA renewBefore", func(l *Lifetimes) { l.CARenewBefore = 0 }, true},
		{"CA shorter than server", func(l *Lifetimes) { l.CADuration = 20 * time.Hour; l.CARenewBefore = time.Hour }, true},
	} {
		l := d
		c.mutate(&l)
		if err := l.Validate(); (err != nil) != c.wantErr {
			t.Errorf("%s: Validate() = %v, want error %v", c.name, err, c.wantErr)
		}
	}
}
