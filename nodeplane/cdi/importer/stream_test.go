package importer

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestImportStreamed: a qcow2 body is converted while it downloads (the
// raw temporary appears before the last bytes are sent), and a download
// that restarts mid-body still gives the image of the complete attempt.
func TestImportStreamed(t *testing.T) {
	requireTool(t, "qemu-img")
	f := makeFixtures(t)
	cases := []struct {
		name     string
		handler  func(dir string) http.HandlerFunc
		want     []byte
		attempts int
	}{
		{
			name: "conversion starts before the body ends",
			handler: func(dir string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					body := f.qcow2
					w.Header().Set("Content-Length", fmt.Sprint(len(body)))
					tail := len(body) - 4096
					w.Write(body[:tail])
					w.(http.Flusher).Flush()
					// Hold the last 4 KiB until qemu-img convert made its
					// output file; give up after a minute (the test then
					// fails below, it does not hang).
					awaitRawTemp(r, dir)
					w.Write(body[tail:])
				}
			},
			want: f.raw, attempts: 1,
		},
		{
			name: "download restarts after half of another image",
			handler: func(string) http.HandlerFunc {
				return breakFirst(f.qcow2, func(w http.ResponseWriter, r *http.Request) {
					body := f.qioQcow2
					w.Header().Set("Content-Length", fmt.Sprint(len(body)))
					w.Write(body[:len(body)/2])
				})
			},
			want: f.raw, attempts: 2,
		},
		{
			// The streamed conversion's raw image exists when the first
			// attempt breaks: it is discarded for the sequential one and
			// must not be left beside the target.
			name: "download restarts after the streamed conversion began",
			handler: func(dir string) http.HandlerFunc {
				return breakFirst(f.qcow2, func(w http.ResponseWriter, r *http.Request) {
					body := f.qcow2
					w.Header().Set("Content-Length", fmt.Sprint(len(body)))
					w.Write(body[:len(body)-4096])
					w.(http.Flusher).Flush()
					awaitRawTemp(r, dir)
				})
			},
			want: f.raw, attempts: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			streamedMissing.Store(false)
			dir := t.TempDir()
			srv := httptest.NewServer(tc.handler(dir))
			defer srv.Close()
			target := filepath.Join(dir, "disk.img")
			o := DefaultOptions()
			o.Retries, o.Backoff = 1, 10*time.Millisecond
			res, err := Import(context.Background(), Source{URL: srv.URL + "/disk.qcow2"}, Target{Path: target, SizeBytes: 4 * mib}, o)
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if streamedMissing.Load() {
				t.Error("qemu-img convert did not start before the download ended")
			}
			if res.Format != "qcow2" || res.Attempts != tc.attempts {
				t.Errorf("format %q after %d attempts, expected qcow2 after %d", res.Format, res.Attempts, tc.attempts)
			}
			got, rerr := os.ReadFile(target)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("target: %d bytes sha256 %s, expected %d bytes sha256 %s", len(got), sha(got), len(tc.want), sha(tc.want))
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("directory holds %v, expected only disk.img", names)
			}
		})
	}
}

// streamedMissing is set by the first case's server when qemu-img convert
// had not started by the time it sent the last bytes.
var streamedMissing atomic.Bool

// rawTempExists reports a ".disk.img.raw-*" temporary in dir.
func rawTempExists(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".disk.img.raw-") {
			return true
		}
	}
	return false
}

// awaitRawTemp waits, up to a minute or until r's client goes, for
// qemu-img convert to make its ".disk.img.raw-*" output in dir; it sets
// streamedMissing when none came.
func awaitRawTemp(r *http.Request, dir string) {
	deadline := time.Now().Add(time.Minute)
	for !rawTempExists(dir) && time.Now().Before(deadline) && r.Context().Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if !rawTempExists(dir) {
		streamedMissing.Store(true)
	}
}

// breakFirst serves the first request with first and then breaks the
// connection (the importer retries), and every later one with body.
func breakFirst(body []byte, first http.HandlerFunc) http.HandlerFunc {
	var hits atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) > 1 {
			http.ServeContent(w, r, "disk.qcow2", time.Time{}, bytes.NewReader(body))
			return
		}
		first(w, r)
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}
}
