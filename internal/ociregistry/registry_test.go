package ociregistry

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestParseReference: plain HTTP is allowed for loopback registries and
// the listed insecure ones only.
func TestParseReference(t *testing.T) {
	for _, tc := range []struct {
		image string
		http  bool
	}{
		{"127.0.0.1:5000/disks/fedora:1", true}, {"localhost:5000/disks/fedora", true}, {"registry.lan:5000/disks/fedora:1", true},
		{"registry.lan/disks/fedora:1", false}, {"quay.io/disks/fedora:1", false}, {"fedora", false},
	} {
		ref, err := ParseReference(tc.image, "registry.lan:5000")
		if err != nil {
			t.Fatal(err)
		}
		if got := ref.Context().Registry.Scheme() == "http"; got != tc.http {
			t.Errorf("%s: plain HTTP allowed %v, want %v", tc.image, got, tc.http)
		}
	}
	if _, err := ParseReference("Quay.io/A B"); err == nil {
		t.Errorf("a malformed reference parsed")
	}
}

// TestTransport: plain HTTP is refused unless the host is loopback or
// listed; a listed host's HTTPS is not verified, another's is.
func TestTransport(t *testing.T) {
	var passed []string
	rt := Transport(recordRT(func(r *http.Request) { passed = append(passed, r.URL.String()) }), []string{"registry.lan:5000"})
	for _, u := range []string{"http://127.0.0.1:5000/v2/", "https://quay.io/v2/", "http://registry.lan:5000/v2/", "http://registry.lan/v2/", "http://10.0.0.1:5000/v2/"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		_, err := rt.RoundTrip(req)
		want := u == "http://registry.lan/v2/" || u == "http://10.0.0.1:5000/v2/"
		if refused := err != nil && strings.Contains(err.Error(), "reached over HTTPS only"); refused != want {
			t.Errorf("%s: %v (refusal wanted: %v)", u, err, want)
		}
	}
	if len(passed) != 3 {
		t.Errorf("requests passed on: %v, want the three allowed", passed)
	}

	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	get := func(insecure ...string) error {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v2/", nil)
		resp, err := Transport(http.DefaultTransport.(*http.Transport).Clone(), insecure).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("an unlisted registry's unknown certificate: %v, want a verification error", err)
	}
	if err := get(host); err != nil {
		t.Errorf("a listed registry: %v, want its certificate unverified", err)
	}
}

// recordRT records each request and fails it.
type recordRT func(*http.Request)

func (f recordRT) RoundTrip(r *http.Request) (*http.Response, error) {
	f(r)
	return nil, errors.New("no network in this test")
}
