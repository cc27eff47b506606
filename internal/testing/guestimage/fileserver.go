package guestimage

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
)

// FileServer serves a fixed set of files of a directory over plain HTTP
// (http.ServeFile: HEAD, Range and Last-Modified as CDI's importer may
// ask); any other path is 404.
type FileServer struct {
	// URL is http://host:port, without a trailing slash.
	URL string

	mu       sync.Mutex
	requests map[string]int
}

// ServeFiles serves the files names of dir at /<name> on addr
// ("127.0.0.1:0" for any free port) until t ends.
func ServeFiles(t testing.TB, addr, dir string, names ...string) *FileServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("file server on %s: %v", addr, err)
	}
	s := &FileServer{URL: "http://" + ln.Addr().String(), requests: map[string]int{}}
	mux := http.NewServeMux()
	for _, n := range names {
		path := filepath.Join(dir, n)
		mux.HandleFunc("/"+n, func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.requests[n]++
			s.mu.Unlock()
			http.ServeFile(w, r, path)
		})
	}
	srv := &http.Server{Handler: mux}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("file server %s: %v", s.URL, err)
		}
	})
	return s
}

// FileURL gives the URL of the file name.
func (s *FileServer) FileURL(name string) string { return fmt.Sprintf("%s/%s", s.URL, name) }

// Requests gives how many requests the file name got.
func (s *FileServer) Requests(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[name]
}
