package libvirtd

import (
	"bytes"
	"io"
	"sync"
)

// outputs serialises the writes of every lineWriter on the same
// destination.
var outputs sync.Mutex

// lineWriter forwards whole non-blank lines to w, each prefixed.
type lineWriter struct {
	w      io.Writer
	prefix string
	mu     sync.Mutex // one writer per daemon, but Flush races the last Write
	buf    []byte
}

func newLineWriter(w io.Writer, prefix string) *lineWriter {
	return &lineWriter{w: w, prefix: prefix}
}

// Write forwards every complete line of p and keeps the rest.
func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if len(bytes.TrimSpace(l.buf[:i])) > 0 {
			l.emit(l.buf[:i+1])
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// Flush forwards a last line without its newline.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(bytes.TrimSpace(l.buf)) > 0 {
		l.emit(append(l.buf, '\n'))
		l.buf = nil
	}
}

func (l *lineWriter) emit(line []byte) {
	outputs.Lock()
	defer outputs.Unlock()
	_, _ = l.w.Write(append([]byte(l.prefix), line...)) // the daemon must not block on its log
}
