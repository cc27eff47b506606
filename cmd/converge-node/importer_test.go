package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportCommand runs `converge-node import` against a loopback HTTP
// server: a raw image lands byte for byte (grown to --size) with progress
// lines ending at 100.00%; a 404 fails naming NotFound and writes nothing.
func TestImportCommand(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatalf("qemu-img not found (apt-get install qemu-utils): %v", err)
		}
		t.Skipf("qemu-img not found (apt-get install qemu-utils): %v", err)
	}
	img := bytes.Repeat([]byte{0, 0, 0, 0, 0xab, 0xcd, 0xef, 1}, 128*1024) // 1 MiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/disk.img" {
			http.NotFound(w, r)
			return
		}
		w.Write(img)
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{"raw", "/disk.img", ""},
		{"404", "/missing.img", "NotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "disk.img")
			var out bytes.Buffer
			err := execute(context.Background(), &out, "import", "--url", srv.URL+tc.path, "--target", target, "--size", "2Mi", "--retries", "0")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, expected one naming %s", err, tc.wantErr)
				}
				if _, serr := os.Stat(target); !os.IsNotExist(serr) {
					t.Errorf("target exists after a failed import: %v", serr)
				}
				return
			}
			if err != nil {
				t.Fatalf("import: %v\n%s", err, out.String())
			}
			got, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]byte{}, img...), make([]byte, 1<<20)...)
			if !bytes.Equal(got, want) {
				t.Errorf("target holds %d bytes, expected the 1 MiB image grown to 2 MiB with zeros", len(got))
			}
			if !strings.Contains(out.String(), "progress 100.00%\n") || !strings.Contains(out.String(), "imported ") {
				t.Errorf("output lacks the final progress and result lines:\n%s", out.String())
			}
		})
	}
}
