package importer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpoolReadAt: reads of a spool see the bytes written by the attempt
// that began, wait for bytes not yet written, and fail once the fill ended
// short or another attempt started.
func TestSpoolReadAt(t *testing.T) {
	cases := []struct {
		name    string
		then    func(s *spool) // runs while a read of [4096, 8192) waits
		wantErr string         // "" : the read returns the second block
	}{
		{name: "bytes arrive", then: func(s *spool) { s.WriteAt(bytes.Repeat([]byte{2}, 4096), 4096); s.written(8192) }},
		{name: "hole at the end", then: func(s *spool) { s.Truncate(8192) }},
		{name: "fill fails", then: func(s *spool) { s.end(errors.New("connection reset")) }, wantErr: "download failed: connection reset"},
		{name: "fill ends short", then: func(s *spool) { s.end(nil) }, wantErr: "past the 4096 downloaded bytes"},
		{name: "attempt restarts", then: func(s *spool) { s.Truncate(0) }, wantErr: errSpoolReset.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "spool"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s := newSpool(f)
			s.Truncate(0)
			s.begin(8192, true)
			w := &sparseWriter{f: s}
			if _, err := w.Write(bytes.Repeat([]byte{1}, 4096)); err != nil {
				t.Fatal(err)
			}
			first := make([]byte, 4096)
			if _, err := s.ReadAt(first, 0); err != nil || first[0] != 1 {
				t.Fatalf("read of written block: %v, byte %d", err, first[0])
			}
			type result struct {
				b   []byte
				err error
			}
			done := make(chan result)
			go func() {
				b := make([]byte, 4096)
				_, err := s.ReadAt(b, 4096)
				done <- result{b, err}
			}()
			tc.then(s)
			r := <-done
			switch {
			case tc.wantErr == "" && r.err != nil:
				t.Fatalf("read: %v", r.err)
			case tc.wantErr != "" && (r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr)):
				t.Fatalf("read error %v, expected one containing %q", r.err, tc.wantErr)
			case tc.wantErr == "" && tc.name == "bytes arrive" && r.b[0] != 2:
				t.Errorf("read byte %d, expected 2", r.b[0])
			case tc.wantErr == "" && tc.name == "hole at the end" && r.b[0] != 0:
				t.Errorf("read byte %d, expected 0 (hole)", r.b[0])
			}
		})
	}
}

// TestSpoolTruncateEmpty: Truncate(0) of a spool whose file is still empty
// makes no ftruncate (on ext4 that would make the spool's close start
// writeback of everything written, and its removal wait for it), yet
// starts an attempt; a spool with bytes is truncated. The file is opened
// read-only, so an ftruncate fails and shows.
func TestSpoolTruncateEmpty(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content []byte
		wantErr bool
	}{
		{name: "empty file", content: nil, wantErr: false},
		{name: "file with bytes", content: []byte("QFI\xfb"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := readOnlyFile(t, tc.content)
			s := newSpool(f)
			gen := s.gen
			err := s.Truncate(0)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Truncate(0): %v; expected an error: %v", err, tc.wantErr)
			}
			if s.gen != gen+1 || s.head != 0 {
				t.Errorf("after Truncate(0): attempt %d, head %d; expected attempt %d, head 0", s.gen, s.head, gen+1)
			}
		})
	}
}

// readOnlyFile writes content to a new file and opens it read-only
// (closed with the test): a spool on it fails any write or ftruncate.
func readOnlyFile(t *testing.T, content []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spool")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
