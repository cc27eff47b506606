package config

import (
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

func TestFromObject(t *testing.T) {
	ctx := cuecontext.New()
	tests := []struct {
		name    string
		data    string
		wantErr string
		wantNS  string
	}{
		{"v1beta1", `{"apiVersion":"hco.kubevirt.io/v1beta1","kind":"HyperConverged","metadata":{"namespace":"a"}}`, "", "a"},
		{"v1", `{"apiVersion":"hco.kubevirt.io/v1","kind":"HyperConverged","metadata":{"namespace":"b"}}`, "", "b"},
		{"other kind", `{"apiVersion":"v1","kind":"ConfigMap"}`, `obj: apiVersion "v1" kind "ConfigMap" is not a HyperConverged`, ""},
		{"other version", `{"apiVersion":"hco.kubevirt.io/v2","kind":"HyperConverged"}`, "is not a HyperConverged", ""},
		{"invalid JSON", `{"apiVersion":`, `invalid JSON for file "obj"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := FromObject(ctx, "obj", []byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ns, _ := cfg.HyperConverged.LookupPath(cue.ParsePath("metadata.namespace")).String()
			if ns != tt.wantNS || cfg.HostPathProvisioner.Exists() || len(cfg.Files) != 1 || cfg.Files[0] != "obj" {
				t.Errorf("config = ns %q, hpp %v, files %v; want ns %q, no HPP, files [obj]", ns, cfg.HostPathProvisioner.Exists(), cfg.Files, tt.wantNS)
			}
			if pos := cfg.HyperConverged.Pos().Filename(); pos != "obj" {
				t.Errorf("positions name %q, want obj", pos)
			}
		})
	}
}
