package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultRequestTimeout is --request-timeout's default: how long one
// request to the API server may take before the command gives up on it.
const DefaultRequestTimeout = 30 * time.Second

// requestTimeout is an http.RoundTripper that bounds every request to
// the API server by d, so a server that accepts connections and never
// answers (hung, partitioned, stopped) ends a command in bounded time
// instead of never: a plain request must be answered, body included,
// within d; a watch or an upgraded stream (exec, console) must send its
// response headers within d and may then stream for as long as it
// lasts. client-go sets no such bound by itself (rest.Config.Timeout
// would also cut watches).
type requestTimeout struct {
	next http.RoundTripper
	d    time.Duration
}

// streaming reports whether req keeps its response open: a watch
// (?watch=true or a /watch/ path) or a connection upgrade.
func streaming(req *http.Request) bool {
	return req.URL.Query().Get("watch") == "true" || strings.Contains(req.URL.Path, "/watch/") ||
		strings.EqualFold(req.Header.Get("Connection"), "Upgrade") || req.Header.Get("Upgrade") != ""
}

func (t requestTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	timedOut := make(chan struct{})
	timer := time.AfterFunc(t.d, func() { close(timedOut); cancel() })
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	select {
	case <-timedOut:
		if err == nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("%s %s: no answer from the API server within %s (--request-timeout)", req.Method, req.URL.Redacted(), t.d)
	default:
	}
	if err != nil {
		timer.Stop()
		cancel()
		return nil, err
	}
	if streaming(req) {
		timer.Stop()
	}
	body := &cancelOnClose{ReadCloser: resp.Body, timer: timer, cancel: cancel}
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		// an upgraded connection (a WebSocket console) is written to
		// through its body, as net/http gives it
		resp.Body = upgradedBody{cancelOnClose: body, w: rw}
		return resp, nil
	}
	resp.Body = body
	return resp, nil
}

// upgradedBody is cancelOnClose for a 101 Switching Protocols response,
// whose body net/http makes an io.ReadWriteCloser: writes go to the
// connection.
type upgradedBody struct {
	*cancelOnClose
	w io.Writer
}

func (b upgradedBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// cancelOnClose releases a request's context and timer when its body is
// closed.
type cancelOnClose struct {
	io.ReadCloser
	timer  *time.Timer
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.timer.Stop()
	b.cancel()
	return err
}
