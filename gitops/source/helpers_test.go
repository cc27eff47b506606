package source

import (
	"encoding/binary"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fixture is a real source repository created with the git CLI:
//
//	trunk (HEAD): c1 -- c2          c1: config/hco.yaml "trunk-1"; c2: "trunk-2"
//	dev:          c1 -- d1          d1: config/hco.yaml "dev-1"
//	tags:         v1 (annotated) -> c1, light (lightweight) -> d1
//
// Every commit also has an executable run.sh, a symlink "inside" -> config,
// a symlink "up" -> .. and a symlink "abs" -> /.
type fixture struct {
	root string // parent directory, served as GIT_PROJECT_ROOT
	dir  string // the repository (non-bare), root/src
	c1   string
	c2   string
	d1   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{root: root, dir: filepath.Join(root, "src")}
	runGit(t, root, "init", "-q", "-b", "trunk", f.dir)
	writeSrc(t, f.dir, "run.sh", "#!/bin/sh\necho hi\n", 0o755)
	for name, target := range map[string]string{"inside": "config", "up": "..", "abs": "/"} {
		if err := os.Symlink(target, filepath.Join(f.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	f.c1 = f.commit(t, "trunk-1")
	runGit(t, f.dir, "tag", "-a", "-m", "release v1", "v1")
	f.c2 = f.commit(t, "trunk-2")
	runGit(t, f.dir, "checkout", "-q", "-b", "dev", f.c1)
	f.d1 = f.commit(t, "dev-1")
	runGit(t, f.dir, "tag", "light")
	runGit(t, f.dir, "checkout", "-q", "trunk")
	return f
}

// commit writes content to config/hco.yaml on the checked-out branch, commits
// it and returns the new commit's SHA.
func (f *fixture) commit(t *testing.T, content string) string {
	t.Helper()
	writeSrc(t, f.dir, "config/hco.yaml", content, 0o644)
	runGit(t, f.dir, "add", "-A")
	runGit(t, f.dir, "commit", "-q", "-m", content)
	return runGit(t, f.dir, "rev-parse", "HEAD")
}

func writeSrc(t *testing.T, dir, rel, content string, perm os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}

// git runs the git CLI in dir with a hermetic configuration and returns its
// trimmed stdout.
func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

var gitEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
	"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com",
}

// httpGit serves the repositories below root with git http-backend over
// loopback. While broken is "all" every request fails with 503; while it is
// "pack" only the pack download (POST .../git-upload-pack) fails.
type httpGit struct {
	*httptest.Server
	broken atomic.Value // string
	// requests counts the requests served.
	requests atomic.Int64
}

func newHTTPGit(t *testing.T, root string) *httpGit {
	t.Helper()
	execPath := runGit(t, root, "--exec-path")
	backend := &cgi.Handler{
		Path:   filepath.Join(execPath, "git-http-backend"),
		Env:    append([]string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, gitEnv...),
		Stderr: logWriter{t},
	}
	h := &httpGit{}
	h.broken.Store("")
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		switch h.broken.Load().(string) {
		case "all":
			http.Error(w, "broken on purpose", http.StatusServiceUnavailable)
			return
		case "pack":
			if strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
				http.Error(w, "broken on purpose", http.StatusServiceUnavailable)
				return
			}
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

// logWriter sends git http-backend's stderr to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("git-http-backend: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

// closedPortURL returns an http URL on loopback where nothing listens.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/src"
}

// hangingServer accepts requests and never answers until the client gives up.
func hangingServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/src"
}

// urlsFor returns the ways of naming the fixture: local path, relative path,
// file:// and http://.
func urlsFor(t *testing.T, f *fixture, srv *httpGit) map[string]string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, f.dir)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"path":     f.dir,
		"relative": rel,
		"file":     "file://" + f.dir,
		"http":     srv.URL + "/src",
	}
}

func readFile(t *testing.T, a Artifact, rel string) string {
	t.Helper()
	p, err := a.Path(rel)
	if err != nil {
		t.Fatalf("Path(%q): %v", rel, err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertTree fails unless a.Dir holds config/hco.yaml with want.
func assertTree(t *testing.T, a Artifact, want string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(a.Dir, "config", "hco.yaml"))
	if err != nil {
		t.Fatalf("artifact %s: %v", a.Revision, err)
	}
	if string(b) != want {
		t.Fatalf("artifact %s: config/hco.yaml = %q, want %q", a.Revision, b, want)
	}
}

// cacheRoot returns the single per-URL cache directory under cacheDir.
func cacheRoot(t *testing.T, cacheDir string) string {
	t.Helper()
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("cache %s has %d entries, want 1", cacheDir, len(entries))
	}
	return filepath.Join(cacheDir, entries[0].Name())
}

// packs returns the pack files of the cached clone with their object counts.
func packs(t *testing.T, root string) map[string]uint32 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "repo", "objects", "pack", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint32{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 12 || string(b[:4]) != "PACK" {
			t.Fatalf("%s is not a pack file", n)
		}
		out[filepath.Base(n)] = binary.BigEndian.Uint32(b[8:12])
	}
	return out
}
