package clidownload_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/converge-dev/converge/operators/hco/clidownload"
)

// TestDownload builds the converge CLI with a version stamped in, lays it
// out as `make cli-binaries` does, serves it over TLS, downloads it as a
// user would (curl's equivalent: an HTTPS GET), checks it against the
// published checksums and runs `converge version`: the downloaded binary
// reports the version it was built with. Paths leaving the directory, a
// symlink out of it and unknown names are 404.
func TestDownload(t *testing.T) {
	const version = "v0.0.0-clidownload-test"
	dir := t.TempDir()
	rel := filepath.Join(runtime.GOARCH, runtime.GOOS, "converge")
	must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
	build := exec.Command("go", "build", "-ldflags", "-X github.com/converge-dev/converge/internal/cli.Version="+version,
		"-o", filepath.Join(dir, rel), "github.com/converge-dev/converge/cmd/converge")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	must(t, os.WriteFile(secret, []byte("not for download"), 0o600))
	must(t, os.MkdirAll(filepath.Join(dir, "amd64", "evil"), 0o755))
	must(t, os.Symlink(secret, filepath.Join(dir, "amd64", "evil", "converge")))

	s, err := clidownload.New(dir)
	must(t, err)
	t.Cleanup(func() { _ = s.Close() })
	if bs, err := s.Binaries(); err != nil || len(bs) != 1 || bs[0].Path != filepath.ToSlash(rel) {
		t.Fatalf("binaries %+v, want only %s (the symlink is not a regular file)", bs, rel)
	}
	srv := httptest.NewTLSServer(s)
	t.Cleanup(srv.Close)
	get := func(p string) (int, []byte) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + p)
		must(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		must(t, err)
		return resp.StatusCode, b
	}

	code, bin := get("/" + filepath.ToSlash(rel))
	if code != http.StatusOK {
		t.Fatalf("GET the binary: %d", code)
	}
	sum := sha256.Sum256(bin)
	_, sidecar := get("/" + filepath.ToSlash(rel) + ".sha256")
	if want := hex.EncodeToString(sum[:]) + "  converge\n"; string(sidecar) != want {
		t.Errorf(".sha256 %q, want %q", sidecar, want)
	}
	_, sums := get("/SHA256SUMS")
	if want := hex.EncodeToString(sum[:]) + "  " + filepath.ToSlash(rel) + "\n"; string(sums) != want {
		t.Errorf("SHA256SUMS %q, want %q", sums, want)
	}
	_, page := get("/")
	if !strings.Contains(string(page), `href="/`+filepath.ToSlash(rel)+`"`) {
		t.Errorf("index does not link the binary:\n%s", page)
	}
	downloaded := filepath.Join(t.TempDir(), "converge")
	must(t, os.WriteFile(downloaded, bin, 0o755))
	out, err := exec.Command(downloaded, "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "converge "+version {
		t.Fatalf("downloaded converge version: %q, %v; want %q", out, err, "converge "+version)
	}

	for _, p := range []string{"/amd64/evil/converge", "/../secret", "/%2e%2e/secret", "/" + runtime.GOARCH + "/" + runtime.GOOS + "/other", "/nothing.sha256"} {
		if code, body := get(p); code != http.StatusNotFound || strings.Contains(string(body), "not for download") {
			t.Errorf("GET %s: %d %q, want 404", p, code, body)
		}
	}
	if _, err := clidownload.New(t.TempDir()); err == nil {
		t.Error("New of an empty directory: no error")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
