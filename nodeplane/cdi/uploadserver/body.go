package uploadserver

import (
	"io"
	"sync"
)

// body is an upload's request body as given to importer.ImportReader: it
// records when the body has been read to its end (or failed), which the
// upload-async path waits for before answering.
type body struct {
	r    io.Reader
	size int64 // Content-Length, -1 if unknown
	once sync.Once
	// done is closed once the body is read to EOF or failed; err is then
	// nil (EOF) or the failure.
	done chan struct{}
	err  error
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		b.finish(err)
	}
	return n, err
}

// finish marks the body done with err (io.EOF: complete); later calls do
// nothing.
func (b *body) finish(err error) {
	b.once.Do(func() {
		if err != io.EOF {
			b.err = err
		}
		close(b.done)
	})
}
