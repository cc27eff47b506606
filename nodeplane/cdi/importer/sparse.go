package importer

import "bytes"

// sparseBlock is the hole granularity: a 4 KiB block of zeros is skipped,
// like qemu-img convert -S 4k.
const sparseBlock = 4096

var zeroBlock [sparseBlock]byte

// sparseWriter writes a stream sequentially into an empty file, leaving
// blocks (aligned to the absolute offset) that are all zeros as holes.
// finish sets the file length, so a trailing hole counts. If f is a
// *spool, it learns after each Write how far the stream has come.
type sparseWriter struct {
	f   sparseFile
	off int64
}

// sparseFile is what sparseWriter writes to (*os.File, *spool).
type sparseFile interface {
	WriteAt(p []byte, off int64) (int, error)
	Truncate(size int64) error
}

func (w *sparseWriter) Write(p []byte) (int, error) {
	runStart := -1 // start in p of the pending run of non-zero blocks
	flush := func(end int) error {
		if runStart < 0 {
			return nil
		}
		_, err := w.f.WriteAt(p[runStart:end], w.off+int64(runStart))
		runStart = -1
		return err
	}
	for i := 0; i < len(p); {
		end := i + sparseBlock - int((w.off+int64(i))%sparseBlock)
		if end > len(p) {
			end = len(p)
		}
		if bytes.Equal(p[i:end], zeroBlock[:end-i]) {
			if err := flush(i); err != nil {
				return 0, err
			}
		} else if runStart < 0 {
			runStart = i
		}
		i = end
	}
	if err := flush(len(p)); err != nil {
		return 0, err
	}
	w.off += int64(len(p))
	if s, ok := w.f.(*spool); ok {
		s.written(w.off)
	}
	return len(p), nil
}

// finish gives the file its full length (trailing zeros become a hole).
func (w *sparseWriter) finish() error { return w.f.Truncate(w.off) }
