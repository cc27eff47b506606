package webhook_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/converge-dev/converge/internal/webhook"
)

// TestConfigurationValidate: a Configuration is either validating or
// mutating, named, and serves every hook's path once.
func TestConfigurationValidate(t *testing.T) {
	h := webhook.Handler{Path: "/a", Handler: http.NotFoundHandler()}
	v := []webhook.ValidatingHook{{Name: "a.test", Path: "/a"}}
	m := []webhook.MutatingHook{{Name: "a.test", Path: "/a"}}
	for _, tc := range []struct {
		name string
		cfg  webhook.Configuration
		want string // "" valid
	}{
		{"validating", webhook.Configuration{Name: "x", Validating: v, Handlers: []webhook.Handler{h}}, ""},
		{"mutating with a conversion path", webhook.Configuration{Name: "x", Mutating: m,
			Handlers: []webhook.Handler{h, {Path: "/convert", Handler: http.NotFoundHandler()}}}, ""},
		{"no name", webhook.Configuration{Validating: v, Handlers: []webhook.Handler{h}}, "no name"},
		{"no hooks", webhook.Configuration{Name: "x", Handlers: []webhook.Handler{h}}, "either validating or mutating"},
		{"both kinds", webhook.Configuration{Name: "x", Validating: v, Mutating: m, Handlers: []webhook.Handler{h}}, "either validating or mutating"},
		{"hook path not served", webhook.Configuration{Name: "x", Validating: v}, `webhook a.test: no handler serves its path "/a"`},
		{"path served twice", webhook.Configuration{Name: "x", Validating: v, Handlers: []webhook.Handler{h, h}}, "path /a is served twice"},
		{"handler without handler", webhook.Configuration{Name: "x", Validating: v, Handlers: []webhook.Handler{{Path: "/a"}}}, "want a path and a handler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestConfigurationTargets: the certificate Manager's targets of a
// Configuration are its webhook configuration, then its conversion CRDs.
func TestConfigurationTargets(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  webhook.Configuration
		want []webhook.Target
	}{
		{"validating", webhook.Configuration{Name: "v", Validating: []webhook.ValidatingHook{{}}},
			[]webhook.Target{{Kind: webhook.ValidatingWebhook, Name: "v"}}},
		{"mutating", webhook.Configuration{Name: "m", Mutating: []webhook.MutatingHook{{}}},
			[]webhook.Target{{Kind: webhook.MutatingWebhook, Name: "m"}}},
		{"with conversions", webhook.Configuration{Name: "v", Validating: []webhook.ValidatingHook{{}}, Conversions: []string{"a.test", "b.test"}},
			[]webhook.Target{{Kind: webhook.ValidatingWebhook, Name: "v"}, {Kind: webhook.CRDConversion, Name: "a.test"}, {Kind: webhook.CRDConversion, Name: "b.test"}}},
	} {
		if got := tc.cfg.Targets(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Targets() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
