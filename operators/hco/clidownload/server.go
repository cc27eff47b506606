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
	// and byPath once, on the first request that needs a checksum.
	paths    []string
	once     sync.Once
	err      error
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

// digest computes every binary's size and SHA-256, once; its error names
// the file.
func (s *Server) digest() error {
	s.once.Do(func() {
		s.byPath = map[string]Binary{}
		for _, p := range s.paths {
			f, err := s.root.Open(p)
			if err != nil {
				s.err = err
				return
			}
			h := sha256.New()
			n, err := io.Copy(h, f)
			_ = f.Close()
			if err != nil {
				s.err = fmt.Errorf("%s: %w", p, err)
				return
			}
			b := Binary{Path: p, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}
			s.binaries = append(s.binaries, b)
			s.byPath[p] = b
		}
	})
	return s.err
}

// Binaries lists the served binaries, sorted by path, with their
// checksums (computed on the first call), or the error reading one.
func (s *Server) Binaries() ([]Binary, error) {
	if err := s.digest(); err != nil {
		return nil, err
	}
	return append([]Binary(nil), s.binaries...), nil
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
	if p != "healthz" {
		if err := s.digest(); err != nil {
			http.Error(w, "binaries unavailable: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	switch {
	case p == "" || p == ".":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = index.Execute(w, s.binaries)
	case p == "healthz":
		_, _ = io.WriteString(w, "ok\n")
	case p == "SHA256SUMS":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, b := range s.binaries {
			fmt.Fprintf(w, "%s  %s\n", b.SHA256, b.Path)
		}
	case strings.HasSuffix(p, ".sha256"):
		b, ok := s.byPath[strings.TrimSuffix(p, ".sha256")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "%s  %s\n", b.SHA256, path.Base(b.Path))
	default:
		b, ok := s.byPath[p]
		if !ok {
			http.NotFound(w, r)
			return
		}
		f, err := s.root.Open(b.Path)
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
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(b.Path)))
		http.ServeContent(w, r, "", st.ModTime(), f)
	}
}
