package importer

import (
	"os"
	"sync"
)

// flushStep is how many bytes a spool grows between two writeback starts.
const flushStep = 8 << 20

// startWriteback is fileWriteback; a variable so tests can count calls.
var startWriteback = fileWriteback

// flusher starts the writeback of a file's dirty pages while the file is
// still being written (fileWriteback: sync_file_range with
// SYNC_FILE_RANGE_WRITE on Linux, which queues the I/O and returns), so
// the fsync or fdatasync that ends an import waits only for the last
// pages instead of writing the whole image after the download or the
// conversion. It is the overlap of disk writes with the network that a
// local `qemu-img convert` has no use for, and it changes no data nor
// when the data is durable: the final fsync (ours, or qemu-img's
// fdatasync) still decides that.
//
// poke asks for a writeback start and never blocks the writer: one
// goroutine runs them, one at a time, coalescing pokes. stop waits for it;
// the file must stay open until then. A nil *flusher does nothing.
type flusher struct {
	f    *os.File
	kick chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// newFlusher starts the goroutine for f.
func newFlusher(f *os.File) *flusher {
	fl := &flusher{f: f, kick: make(chan struct{}, 1)}
	fl.wg.Add(1)
	go func() {
		defer fl.wg.Done()
		for range fl.kick {
			// An error (a filesystem without writeback, say) only
			// means the final fsync does all the work, as without
			// the flusher.
			_ = startWriteback(fl.f)
		}
	}()
	return fl
}

func (fl *flusher) poke() {
	if fl == nil {
		return
	}
	select {
	case fl.kick <- struct{}{}:
	default:
	}
}

func (fl *flusher) stop() {
	if fl == nil {
		return
	}
	fl.once.Do(func() { close(fl.kick) })
	fl.wg.Wait()
}
