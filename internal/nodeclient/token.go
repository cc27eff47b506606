package nodeclient

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
)

// ErrNoToken is BearerToken's refusal of a configuration that
// authenticates without a bearer token (a client certificate, a password).
var ErrNoToken = errors.New("the configuration's user has no bearer token (it authenticates with a client certificate or a password), and the node's console server accepts only tokens")

// BearerToken gives the token cfg sends to the API server (a token, a
// token file, re-read as it rotates, an exec or auth-provider plugin), by
// running a request through client-go's authentication wrappers, or
// ErrNoToken. converge-controller's virt-api (operators/virt/virtapi)
// authenticates to the node agents' console servers with its own
// ServiceAccount token this way.
func BearerToken(cfg *rest.Config) (string, error) {
	var got string
	rt, err := rest.HTTPWrappersForConfig(cfg, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Get("Authorization")
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	}))
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	req, err := http.NewRequest(http.MethodGet, "https://console.invalid/", nil)
	if err != nil {
		return "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", fmt.Errorf("kubeconfig: getting a bearer token: %w", err)
	}
	_ = resp.Body.Close()
	scheme, token, ok := strings.Cut(got, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", ErrNoToken
	}
	return token, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
