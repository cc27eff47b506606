// Package safebuffer is a bytes.Buffer that one goroutine may write while
// another reads it: the output of a child process (exec copies its
// stdout/stderr in goroutines) or of a command running in the background,
// read by the test that waits for a line.
package safebuffer

import (
	"bytes"
	"sync"
)

// Buffer is a mutex-guarded bytes.Buffer; the zero value is empty and ready
// to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns a copy of everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
