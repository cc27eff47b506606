package clidownload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Binary is one served binary.
type Binary struct {
	// Path is its path below the Server's root, "<arch>/<os>/<name>".
	Path string
	// Size is its size in bytes.
	Size int64
	// SHA256 is the hex SHA-256 of its content.
	SHA256 string
}

// Server is the http.Handler of the cli-download role.
type Server struct {
	root *os.Root
	// paths are the binaries' paths, sorted; digest fills binaries
	// and byPath on the first request that needs a checksum (again after
	// a failed read: a failure is not kept).
	paths    []string
	mu       sync.Mutex
	binaries []Binary
	byPath   map[string]Binary
}

// New opens dir and lists every regular file named converge or
// converge.exe two levels down (<arch>/<os>/); it fails when dir cannot be
// opened or holds none, naming dir. The files are digested on the first
// request that needs their checksums (Binaries, the index, .sha256,
// SHA256SUMS), not at start-up.
func New(dir string) (*Server, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("cli-download: %w", err)
	}
	s := &Server{root: root}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Count(p, "/") == 2 && d.Type().IsRegular() && (d.Name() == "converge" || d.Name() == "converge.exe") {
			s.paths = append(s.paths, p)
		}
		return nil
	})
	if err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("cli-download: reading %s: %w", dir, err)
	}
	if len(s.paths) == 0 {
		_ = root.Close()
		return nil, fmt.Errorf("cli-download: %s holds no <arch>/<os>/converge[.exe]; expected `make cli-binaries` output", dir)
	}
	sort.Strings(s.paths)
	return s, nil
}

// digest gives every binary's size and SHA-256, computed on the first
// call that succeeds and kept; an error names the file, and the next call
// reads again.
func (s *Server) digest() ([]Binary, map[string]Binary, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byPath != nil {
		return s.binaries, s.byPath, nil
	}
	var binaries []Binary
	byPath := map[string]Binary{}
	for _, p := range s.paths {
		f, err := s.root.Open(p)
		if err != nil {
			return nil, nil, err
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		b := Binary{Path: p, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}
		binaries = append(binaries, b)
		byPath[p] = b
	}
	s.binaries, s.byPath = binaries, byPath
	return binaries, byPath, nil
}

// Binaries lists the served binaries, sorted by path, with their
// checksums (computed on the first call), or the error reading one.
func (s *Server) Binaries() ([]Binary, error) {
	binaries, _, err := s.digest()
	if err != nil {
		return nil, err
	}
	return append([]Binary(nil), binaries...), nil
}

// Close releases Dir.
func (s *Server) Close() error { return s.root.Close() }

var index = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html><head><title>converge command line tools</title></head><body>
<h1>converge command line tools</h1>
<ul>
{{range .}}<li><a href="/{{.Path}}">{{.Path}}</a> ({{.Size}} bytes, sha256 <a href="/{{.Path}}.sha256">{{.SHA256}}</a>)</li>
{{end}}</ul>
<p><a href="/SHA256SUMS">SHA256SUMS</a></p>
</body></html>
`))

// ServeHTTP serves the paths of the package doc; anything else is 404,
// a method other than GET or HEAD 405.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "expected GET", http.StatusMethodNotAllowed)
		return
	}
	p := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	sums := func() ([]Binary, map[string]Binary, bool) {
		binaries, byPath, err := s.digest()
		if err != nil {
			http.Error(w, "checksums unavailable: "+err.Error(), http.StatusInternalServerError)
		}
		return binaries, byPath, err == nil
	}
	switch {
	case p == "" || p == ".":
		if binaries, _, ok := sums(); ok {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_ = index.Execute(w, binaries)
		}
	case p == "healthz":
		_, _ = io.WriteString(w, "ok\n")
	case p == "SHA256SUMS":
		if binaries, _, ok := sums(); ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			for _, b := range binaries {
				fmt.Fprintf(w, "%s  %s\n", b.SHA256, b.Path)
			}
		}
	case strings.HasSuffix(p, ".sha256"):
		_, byPath, ok := sums()
		if !ok {
			return
		}
		b, ok := byPath[strings.TrimSuffix(p, ".sha256")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "%s  %s\n", b.SHA256, path.Base(b.Path))
	default:
		// A binary is served without its checksum: no digest needed.
		if _, ok := slices.BinarySearch(s.paths, p); !ok {
			http.NotFound(w, r)
			return
		}
		f, err := s.root.Open(p)
		if err != nil {
			http.Error(w, "binary unavailable", http.StatusInternalServerError)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			http.Error(w, "binary unavailable", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
		http.ServeContent(w, r, "", st.ModTime(), f)
	}
}
