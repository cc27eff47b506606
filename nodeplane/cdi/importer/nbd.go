package importer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/pojntfx/go-nbd/pkg/server"
)

// nbdExport serves a spool of known size, read-only, to qemu-img over NBD
// on a Unix socket in a private directory (the role nbdkit plays in CDI's
// pkg/image/nbdkit.go). URI is what qemu-img opens
// ("nbd+unix:///?socket=..."); Close stops it and removes the socket.
//
// GatedURI names a second export of the same bytes whose reads wait until
// open(nil) is called, and fail after open(err): qemu-img convert can
// start (a process start costs 5-20 ms) while qemu-img info and the
// checks still run, and cannot read a byte of the image, so cannot learn
// of a backing or data file to open, before they passed.
type nbdExport struct {
	URI      string
	GatedURI string
	dir      string
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conn     []net.Conn

	gate     chan struct{} // closed by open
	gateErr  error
	gateOnce sync.Once
}

// gatedExport is the export name of nbdExport.GatedURI.
const gatedExport = "gated"

// errExportClosed fails gated reads of an export closed before open.
var errExportClosed = errors.New("the image export was closed before its checks passed")

// open decides the gate: nil lets gated reads through, an error fails
// them. Only the first call counts.
func (e *nbdExport) open(err error) {
	e.gateOnce.Do(func() {
		e.gateErr = err
		close(e.gate)
	})
}

// spoolBackend is the go-nbd backend of a spool: reads wait for the
// download (and, with gate set, for nbdExport.open), writes are refused.
type spoolBackend struct {
	s    *spool
	size int64
	gate *nbdExport
}

func (b spoolBackend) ReadAt(p []byte, off int64) (int, error) {
	if b.gate != nil {
		<-b.gate.gate
		if b.gate.gateErr != nil {
			return 0, b.gate.gateErr
		}
	}
	return b.s.ReadAt(p, off)
}
func (b spoolBackend) WriteAt([]byte, int64) (int, error) {
	return 0, errors.New("the image export is read-only")
}
func (b spoolBackend) Size() (int64, error) { return b.size, nil }
func (b spoolBackend) Sync() error          { return nil }

// serveNBD exports the first size bytes of s; the socket lives in a new
// directory (mode 0700) under os.TempDir, since socket paths are short.
func serveNBD(s *spool, size int64) (*nbdExport, error) {
	dir, err := os.MkdirTemp("", "converge-import-")
	if err != nil {
		return nil, fmt.Errorf("socket directory for the NBD export: %w", err)
	}
	sock := filepath.Join(dir, "nbd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("NBD export socket: %w", err)
	}
	e := &nbdExport{URI: "nbd+unix:///?socket=" + sock, GatedURI: "nbd+unix:///" + gatedExport + "?socket=" + sock, dir: dir, ln: ln, gate: make(chan struct{})}
	exports := []*server.Export{
		{Name: "", Backend: spoolBackend{s: s, size: size}},
		{Name: gatedExport, Backend: spoolBackend{s: s, size: size, gate: e}},
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conn = append(e.conn, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				// SupportsMultiConn also sets NBD_FLAG_HAS_FLAGS, without
				// which qemu's client refuses the export ("broken server
				// omitted NBD_INFO_EXPORT"); reads of one file are safe
				// over several connections.
				_ = server.Handle(c, exports, &server.Options{ReadOnly: true, SupportsMultiConn: true})
			}()
		}
	}()
	return e, nil
}

// Close stops accepting, fails gated reads still waiting, closes open
// connections, waits for the handlers and removes the socket directory.
func (e *nbdExport) Close() {
	e.open(errExportClosed)
	e.ln.Close()
	e.mu.Lock()
	for _, c := range e.conn {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
	os.RemoveAll(e.dir)
}
