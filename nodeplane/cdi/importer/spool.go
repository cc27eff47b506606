package importer

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// spool is the temporary file a source is written into, sequentially, by
// one attempt after another (Truncate(0) starts an attempt). While it is
// written, ReadAt serves the bytes the current attempt has already written
// and blocks for the rest, so qemu-img can read the image (through
// serveNBD) while it still downloads, as CDI streams it through nbdkit.
type spool struct {
	*os.File

	mu     sync.Mutex
	cond   *sync.Cond
	gen    int   // attempt number, bumped by Truncate(0)
	head   int64 // bytes of this attempt written (holes included)
	ended  bool  // the fill is over (see endErr)
	endErr error

	// flushOn: the current attempt's body is not qcow2, so every
	// flushStep bytes written (flushed: up to where) start writeback
	// (flush, made on first use): such a spool is usually the image
	// itself, renamed into place after an fsync. A qcow2 spool is removed
	// after conversion; writing it to disk would only take bandwidth from
	// the converted image. Other formats qemu-img converts (vmdk, vhd,
	// ...) are flushed too: the sniff does not know them, and the cost is
	// disk bandwidth only.
	flushOn bool
	flush   *flusher
	flushed int64

	// start is closed once the first attempt knows its body: total bytes
	// (-1: unknown) and whether it is qcow2.
	start    chan struct{}
	total    int64
	qcow2    bool
	startGen int
}

// errSpoolReset fails a read of a spool whose download restarted.
var errSpoolReset = errors.New("the download restarted; bytes already read are stale")

func newSpool(f *os.File) *spool {
	s := &spool{File: f, start: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Truncate sets the file length; size 0 starts a new attempt.
//
// Truncate(0) of a file that is still empty (the first attempt) makes no
// system call: on ext4 (mount option auto_da_alloc, the default) a
// truncation to 0 marks the file as "replaced by truncate", so its close
// starts writeback of every byte written since, and the removal of the
// spool after a conversion then waits for that I/O (tens of ms per
// 64 MiB, competing with the fsync of the converted image).
func (s *spool) Truncate(size int64) error {
	var err error
	if size != 0 || !s.empty() {
		err = s.File.Truncate(size)
	}
	s.mu.Lock()
	if size == 0 {
		s.gen++
		s.head = 0
		s.flushOn, s.flushed = false, 0
	} else if err == nil && size > s.head {
		s.head = size
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	return err
}

// empty reports whether the file has length 0 (nothing to truncate).
func (s *spool) empty() bool {
	st, err := s.File.Stat()
	return err == nil && st.Size() == 0
}

// written records that the current attempt has written up to off.
func (s *spool) written(off int64) {
	s.mu.Lock()
	if off > s.head {
		s.head = off
		s.cond.Broadcast()
	}
	if s.flushOn && off-s.flushed >= flushStep {
		s.flushed = off
		if s.flush == nil {
			s.flush = newFlusher(s.File)
		}
		s.flush.poke()
	}
	s.mu.Unlock()
}

// begin records the body of the current attempt (copyBody calls it after
// sniffing the first bytes); the first call closes s.start.
func (s *spool) begin(total int64, qcow2 bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushOn = !qcow2
	select {
	case <-s.start:
		return
	default:
	}
	s.total, s.qcow2, s.startGen = total, qcow2, s.gen
	close(s.start)
}

// end records that the fill is over, with its error (nil: complete), and
// waits for a writeback start under way.
func (s *spool) end(err error) {
	s.mu.Lock()
	s.ended, s.endErr = true, err
	s.cond.Broadcast()
	fl := s.flush
	s.flush, s.flushOn = nil, false
	s.mu.Unlock()
	fl.stop()
}

// stale reports whether an attempt after the one begin saw wrote the file.
func (s *spool) stale() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen != s.startGen
}

// ReadAt waits until the attempt begin saw has written p's range (or the
// fill ended), then reads it; it fails once another attempt started.
func (s *spool) ReadAt(p []byte, off int64) (int, error) {
	want := off + int64(len(p))
	s.mu.Lock()
	for s.gen == s.startGen && s.head < want && !s.ended {
		s.cond.Wait()
	}
	gen, head, endErr := s.gen, s.head, s.endErr
	s.mu.Unlock()
	switch {
	case gen != s.startGen:
		return 0, errSpoolReset
	case head < want && endErr != nil:
		return 0, fmt.Errorf("download failed: %w", endErr)
	case head < want:
		return 0, fmt.Errorf("read of %d bytes at %d is past the %d downloaded bytes", len(p), off, head)
	}
	return s.File.ReadAt(p, off)
}
