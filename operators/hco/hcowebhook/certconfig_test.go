package hcowebhook

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/webhook"
)

func TestLifetimes(t *testing.T) {
	hc := func(cc map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		u.SetNamespace("ns")
		u.SetName("kubevirt-hyperconverged")
		if cc != nil {
			u.Object["spec"] = map[string]any{"security": map[string]any{"certConfig": cc}}
		}
		return u
	}
	tests := []struct {
		name    string
		cc      map[string]any
		want    webhook.Lifetimes
		wantErr string
	}{
		{"absent keeps HCO defaults", nil, webhook.DefaultLifetimes(), ""},
		{"all set", map[string]any{
			"ca":     map[string]any{"duration": "96h0m0s", "renewBefore": "48h0m0s"},
			"server": map[string]any{"duration": "1h30m0s", "renewBefore": "30m"},
		}, webhook.Lifetimes{CADuration: 96 * time.Hour, CARenewBefore: 48 * time.Hour,
			ServerDuration: 90 * time.Minute, ServerRenewBefore: 30 * time.Minute}, ""},
		{"partly set", map[string]any{"server": map[string]any{"duration": "36h"}},
			webhook.Lifetimes{CADuration: 48 * time.Hour, CARenewBefore: 24 * time.Hour,
				ServerDuration: 36 * time.Hour, ServerRenewBefore: 12 * time.Hour}, ""},
		{"unparsable", map[string]any{"ca": map[string]any{"duration": "two days"}}, webhook.Lifetimes{},
			"spec.security.certConfig.ca.duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Lifetimes(hc(tt.cc))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Lifetimes = %+v, want %+v", got, tt.want)
			}
		})
	}
}
