package ociregistry

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ParseReference parses an image reference (Docker Hub when it names no
// registry, as the kubelet); a loopback registry, or one of insecure
// (host[:port] as the registry appears in the reference), gets
// name.Insecure, so that it may be reached over plain HTTP.
func ParseReference(image string, insecure ...string) (name.Reference, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, err
	}
	if reg := ref.Context().RegistryStr(); IsLoopback(reg) || slices.Contains(insecure, reg) {
		return name.ParseReference(image, name.Insecure)
	}
	return ref, nil
}

// IsLoopback reports whether a registry host[:port] is localhost or a
// loopback address.
func IsLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Transport gives the round tripper of a pull: next (nil:
// go-containerregistry's remote.DefaultTransport) for verified HTTPS and
// loopback registries; for the hosts of insecure, a copy of next's
// *http.Transport (when it is one) that does not verify certificates;
// and a refusal of plain HTTP to any other host.
func Transport(next http.RoundTripper, insecure []string) http.RoundTripper {
	if next == nil {
		next = remote.DefaultTransport
	}
	t := transport{next: next, insecure: insecure, unverified: next}
	if len(insecure) > 0 {
		if ht, ok := next.(*http.Transport); ok {
			c := ht.Clone()
			if c.TLSClientConfig == nil {
				c.TLSClientConfig = &tls.Config{}
			}
			c.TLSClientConfig.InsecureSkipVerify = true //nolint:gosec // the CDI CR lists this registry as insecure
			t.unverified = c
		}
	}
	return t
}

type transport struct {
	next, unverified http.RoundTripper
	insecure         []string
}

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	listed := slices.Contains(t.insecure, r.URL.Host)
	if r.URL.Scheme != "https" && !IsLoopback(r.URL.Host) && !listed {
		return nil, fmt.Errorf("%s %s refused: registries other than loopback ones are reached over HTTPS only", r.Method, r.URL.Redacted())
	}
	if listed {
		return t.unverified.RoundTrip(r)
	}
	return t.next.RoundTrip(r)
}
