package cdiupload

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// bridge serves one request body once, over loopback HTTP, so that
// nodeplane/importer (whose Source is a URL) runs its whole pipeline on
// an upload: body limit, image sniffing, qemu-img conversion, sparse
// placement, progress. The path is random and the listener only takes
// 127.0.0.1; the body can be read once (importer retries are off).
//
// TODO(importer owner): an importer.ImportReader(ctx, io.Reader, size,
// Target, Options) would make this adapter unnecessary.
type bridge struct {
	URL string
	// copied is closed once the body has been served to the end (or
	// failed); copyErr is then the copy's error.
	copied  chan struct{}
	copyErr error
	l       net.Listener
	srv     *http.Server
	once    sync.Once
	mu      sync.Mutex
	served  bool
}

func newBridge(body io.Reader, size int64) (*bridge, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("upload bridge: listen on loopback: %w", err)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	path := "/" + hex.EncodeToString(secret)
	b := &bridge{URL: "http://" + l.Addr().String() + path, l: l, copied: make(chan struct{})}
	b.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		b.mu.Lock()
		again := b.served
		b.served = true
		b.mu.Unlock()
		if again {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if size >= 0 {
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		}
		_, b.copyErr = io.Copy(w, body)
		close(b.copied)
	})}
	go func() { _ = b.srv.Serve(l) }()
	return b, nil
}

// Close stops serving; a body never requested counts as copied with an
// error.
func (b *bridge) Close() {
	b.once.Do(func() {
		_ = b.srv.Close()
		b.mu.Lock()
		if !b.served {
			b.served = true
			b.copyErr = errors.New("the importer did not read the upload body")
			close(b.copied)
		}
		b.mu.Unlock()
	})
}
