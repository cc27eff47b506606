package gitserver

import (
	"bytes"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// downState is what Down, Up and DownMidFetch keep.
type downState struct {
	mu       sync.Mutex
	isDown   bool
	addr     string      // where Up listens again
	midFetch atomic.Bool // DownMidFetch armed
}

// Down takes the server down as a crashed or stopped server is: its
// listener is closed, so new connections are refused, and the connections
// open now (a fetch in flight) are cut. Up brings it back. Down of a
// server already down does nothing.
func (h *HTTP) Down() {
	h.down.mu.Lock()
	defer h.down.mu.Unlock()
	if h.down.isDown {
		return
	}
	h.down.isDown = true
	h.down.addr = h.Listener.Addr().String()
	h.Listener.Close()
	h.CloseClientConnections()
}

// Up serves again on the address the server had before Down (same URL,
// same certificate); it fails t when the address cannot be bound. Up of a
// server that is not down does nothing.
func (h *HTTP) Up(t testing.TB) {
	t.Helper()
	h.down.mu.Lock()
	defer h.down.mu.Unlock()
	if !h.down.isDown {
		return
	}
	l, err := net.Listen("tcp", h.down.addr)
	if err != nil {
		t.Fatalf("gitserver: listening again on %s: %v", h.down.addr, err)
	}
	if h.TLS != nil {
		l = tls.NewListener(l, h.TLS)
	}
	h.Listener = l // Close closes this one
	h.down.isDown = false
	go func() { _ = h.Config.Serve(l) }()
}

// IsDown reports whether the server is down (Down, or a cut by
// DownMidFetch) and not brought Up since.
func (h *HTTP) IsDown() bool {
	h.down.mu.Lock()
	defer h.down.mu.Unlock()
	return h.down.isDown
}

// DownMidFetch arms a fault for the next fetch: the next git-upload-pack
// response that carries a pack is cut in the middle of the pack (its
// first half is sent), when the server goes Down. Call Up to bring it
// back.
func (h *HTTP) DownMidFetch() { h.down.midFetch.Store(true) }

// cutPack reports whether r is an upload-pack request while DownMidFetch
// is armed: its response may be the one to cut.
func (h *HTTP) cutPack(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") && h.down.midFetch.Load()
}

// cutWriter holds a response back (status and body) until finish.
type cutWriter struct {
	http.ResponseWriter
	h      *HTTP
	status int
	body   bytes.Buffer
}

func (h *HTTP) holdResponse(w http.ResponseWriter) *cutWriter {
	return &cutWriter{ResponseWriter: w, h: h, status: http.StatusOK}
}

func (c *cutWriter) WriteHeader(status int)      { c.status = status }
func (c *cutWriter) Write(p []byte) (int, error) { return c.body.Write(p) }

// finish sends the response held back: whole, unless it carries a pack
// ("PACK" signature: protocol v2's ls-refs answer does not) and
// DownMidFetch is still armed (disarming it); then it sends the response
// up to the middle of the pack, flushed, and takes the server Down, which
// cuts the connection before the rest.
func (c *cutWriter) finish() {
	b := c.body.Bytes()
	i := bytes.Index(b, []byte("PACK"))
	c.ResponseWriter.WriteHeader(c.status)
	if i < 0 || !c.h.down.midFetch.CompareAndSwap(true, false) {
		_, _ = c.ResponseWriter.Write(b)
		return
	}
	_, _ = c.ResponseWriter.Write(b[:i+(len(b)-i)/2])
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	c.h.Down()
}
