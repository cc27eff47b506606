package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFluxMissing(t *testing.T) {
	want := map[string]string{"source-controller": "github.com/fluxcd/source-controller@v1.9.1"}
	// Each case builds bin/flux up to a point; err is what fluxMissing
	// must name, "" for nothing missing.
	for _, tc := range []struct {
		name          string
		stamp         string
		crd, exe, bin bool
		err           string
	}{
		{"complete", "github.com/fluxcd/source-controller@v1.9.1\n", true, true, true, ""},
		{"never built", "", false, false, false, "source-controller (no source-controller.version)"},
		{"older version", "github.com/fluxcd/source-controller@v1.8.0", true, true, true, "built github.com/fluxcd/source-controller@v1.8.0, want github.com/fluxcd/source-controller@v1.9.1"},
		{"no CRDs", "github.com/fluxcd/source-controller@v1.9.1", false, true, true, "no CRDs in crds/source-controller"},
		{"binary not executable", "github.com/fluxcd/source-controller@v1.9.1", true, false, true, "no executable"},
		{"binary gone", "github.com/fluxcd/source-controller@v1.9.1", true, false, false, "no executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(rel string, mode os.FileMode) {
				p := filepath.Join(dir, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tc.stamp), mode); err != nil {
					t.Fatal(err)
				}
			}
			if tc.stamp != "" {
				write("source-controller.version", 0o644)
			}
			if tc.crd {
				write("crds/source-controller/gitrepositories.yaml", 0o644)
			}
			if tc.bin {
				mode := os.FileMode(0o644)
				if tc.exe {
					mode = 0o755
				}
				write("source-controller", mode)
			}
			err := fluxMissing(dir, want)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("fluxMissing = %v, want nil", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), dir)):
				t.Fatalf("fluxMissing = %v, want an error naming %s and %q", err, dir, tc.err)
			}
		})
	}
}
