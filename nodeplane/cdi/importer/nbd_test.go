package importer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestNBDGate: qemu-img reading the export's gated name gets no byte
// until open(nil); after open(err), or a Close before any open, its reads
// fail. The ungated name is served at once.
func TestNBDGate(t *testing.T) {
	fx := makeFixtures(t)
	for _, tc := range []struct {
		name    string
		decide  func(e *nbdExport)
		wantErr bool
	}{
		{name: "checks passed", decide: func(e *nbdExport) { e.open(nil) }},
		{name: "checks failed", decide: func(e *nbdExport) { e.open(errors.New("refused")) }, wantErr: true},
		{name: "export closed", decide: func(e *nbdExport) { e.Close() }, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := readOnlyFile(t, fx.qcow2)
			s := newSpool(f)
			size := int64(len(fx.qcow2))
			s.begin(size, true)
			s.written(size)
			e, err := serveNBD(s, size)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if info, err := qemuInfo(ctx, "qemu-img", e.URI); err != nil || info.Format != "qcow2" {
				t.Fatalf("ungated export: %+v, %v", info, err)
			}
			type result struct {
				info imageInfo
				err  error
			}
			done := make(chan result, 1)
			go func() {
				info, err := qemuInfo(ctx, "qemu-img", e.GatedURI)
				done <- result{info, err}
			}()
			select {
			case r := <-done:
				t.Fatalf("gated export read before the gate opened: %+v, %v", r.info, r.err)
			case <-time.After(300 * time.Millisecond):
			}
			tc.decide(e)
			r := <-done
			switch {
			case tc.wantErr && r.err == nil:
				t.Fatalf("gated read succeeded: %+v", r.info)
			case tc.wantErr && !strings.Contains(r.err.Error(), "qemu-img"):
				t.Fatalf("unexpected error: %v", r.err)
			case !tc.wantErr && (r.err != nil || r.info.Format != "qcow2"):
				t.Fatalf("gated export after open(nil): %+v, %v", r.info, r.err)
			}
		})
	}
}
