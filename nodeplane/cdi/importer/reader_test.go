package importer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// failingReader gives data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestImportReader streams the fixtures through ImportReader: images land
// byte for byte (qcow2 converted through the spooled temporary file),
// refusals carry the importer's reasons, and no temporary file remains.
func TestImportReader(t *testing.T) {
	f := makeFixtures(t)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name   string
		ctx    context.Context
		r      func() io.Reader
		size   int64 // stream length given; -2: the body's own length
		volume int64
		want   []byte
		format string
		reason Reason
	}{
		{name: "raw", r: func() io.Reader { return bytes.NewReader(f.raw) }, size: -2, volume: 6 * mib, want: padded(f.raw, 6*mib), format: "raw"},
		{name: "qcow2", r: func() io.Reader { return bytes.NewReader(f.qcow2) }, size: -2, volume: 4 * mib, want: f.raw, format: "qcow2"},
		{name: "qcow2 unknown length", r: func() io.Reader { return bytes.NewReader(f.qioQcow2) }, size: -1, volume: 8 * mib, want: f.qioRaw, format: "qcow2"},
		{name: "html", r: func() io.Reader { return strings.NewReader("<!DOCTYPE html><html><body>login</body></html>") }, size: -2, volume: 4 * mib, reason: ReasonNotAnImage},
		{name: "backing file", r: func() io.Reader { return bytes.NewReader(f.backing) }, size: -2, volume: 4 * mib, reason: ReasonNotAnImage},
		{name: "qcow2 too big", r: func() io.Reader { return bytes.NewReader(f.qioQcow2) }, size: -2, volume: 4 * mib, reason: ReasonTooBig},
		{name: "body over the limit", r: func() io.Reader { return io.LimitReader(neverZero{}, 80*mib) }, size: -1, volume: 1 * mib, reason: ReasonTooBig},
		{name: "shorter than announced", r: func() io.Reader { return bytes.NewReader(f.raw) }, size: 5 * mib, volume: 6 * mib, reason: ReasonUnreachable},
		{name: "read error", r: func() io.Reader { return &failingReader{data: f.raw[:mib], err: errors.New("client went away")} }, size: -1, volume: 4 * mib, reason: ReasonUnreachable},
		{name: "canceled", ctx: canceled, r: func() io.Reader { return bytes.NewReader(f.raw) }, size: -2, volume: 4 * mib, reason: ReasonCanceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "disk.img")
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			size := tc.size
			r := tc.r()
			if size == -2 {
				size = int64(r.(interface{ Len() int }).Len())
			}
			var reports []Progress
			opts := DefaultOptions()
			opts.ProgressInterval = 0
			opts.Progress = func(p Progress) { reports = append(reports, p) }
			res, err := ImportReader(ctx, r, size, Target{Path: target, SizeBytes: tc.volume}, opts)
			if tc.reason != "" {
				if ReasonOf(err) != tc.reason || IsRetryable(err) {
					t.Fatalf("error %v: expected a non-retryable %s", err, tc.reason)
				}
				if !strings.Contains(err.Error(), "stream to "+target) {
					t.Errorf("error %q does not name the target", err)
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("%d files left in the target directory, expected none", len(entries))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, rerr := os.ReadFile(target)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if !bytes.Equal(got, tc.want) || res.Format != tc.format || res.Attempts != 1 {
				t.Errorf("target %d bytes (equal %v), format %q, attempts %d; want %d bytes, %q, 1", len(got), bytes.Equal(got, tc.want), res.Format, res.Attempts, len(tc.want), tc.format)
			}
			checkProgress(t, reports, tc.format != "raw")
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("%d files in the target directory, expected disk.img only", len(entries))
			}
		})
	}
}

// neverZero is an endless stream of 0x5a bytes.
type neverZero struct{}

func (neverZero) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 0x5a
	}
	return len(p), nil
}
