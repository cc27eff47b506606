package nodeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/converge-dev/converge/api/nodeendpoint"
)

// DialConsole opens the console of VMI ns/name at e (the
// nodeendpoint.Console endpoint of the VMI's Node) with a bearer token and
// gives the session as a stream: Read gives the guest's output and io.EOF
// when the console ends (the domain stopped), Write sends input, Close
// ends the session. ctx bounds the dial and the session. Only the
// certificate whose SHA-256 is e.CertSHA256 is accepted. A refusal is a
// *ConsoleRefusedError naming the address with the server's status and
// message, e.g. "console server 10.0.0.5:8186: 403 Forbidden: console:
// User ... cannot get ...".
func DialConsole(ctx context.Context, e nodeendpoint.Endpoint, token, ns, name string) (io.ReadWriteCloser, error) {
	if err := nodeendpoint.Console.Validate(e); err != nil {
		return nil, fmt.Errorf("console server: %w", err)
	}
	tlsConfig := nodeendpoint.Console.ClientTLS(e.CertSHA256, false)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, TLSHandshakeTimeout: 10 * time.Second}}
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	url := "wss://" + e.Address + nodeendpoint.ConsolePath(ns, name)
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: h, Subprotocols: []string{nodeendpoint.ConsoleSubprotocol}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			msg := ""
			if resp.Body != nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				msg = strings.TrimSpace(string(b))
			}
			return nil, &ConsoleRefusedError{Address: e.Address, StatusCode: resp.StatusCode, Message: msg}
		}
		return nil, fmt.Errorf("console server %s: %w", e.Address, err)
	}
	if ws.Subprotocol() != nodeendpoint.ConsoleSubprotocol {
		_ = ws.Close(websocket.StatusProtocolError, "unsupported subprotocol")
		return nil, fmt.Errorf("console server %s: subprotocol %q, want %q", e.Address, ws.Subprotocol(), nodeendpoint.ConsoleSubprotocol)
	}
	return &session{nc: websocket.NetConn(ctx, ws, websocket.MessageBinary), addr: e.Address}, nil
}

// ConsoleRefusedError is a console server's refusal of a session.
type ConsoleRefusedError struct {
	// Address is the server's host:port.
	Address string
	// StatusCode is the HTTP status: 401, 403, 404, 409, 502.
	StatusCode int
	// Message is the server's explanation.
	Message string
}

// Error gives "console server ADDRESS: CODE TEXT: MESSAGE".
func (e *ConsoleRefusedError) Error() string {
	return fmt.Sprintf("console server %s: %d %s: %s", e.Address, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// session is the stream DialConsole gives; errors other than the end name the
// server.
type session struct {
	nc   io.ReadWriteCloser
	addr string
}

func (s *session) Read(p []byte) (int, error) {
	n, err := s.nc.Read(p)
	return n, s.wrap(err)
}

func (s *session) Write(p []byte) (int, error) {
	n, err := s.nc.Write(p)
	return n, s.wrap(err)
}

func (s *session) Close() error { return s.nc.Close() }

func (s *session) wrap(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	return fmt.Errorf("console server %s: %w", s.addr, err)
}
