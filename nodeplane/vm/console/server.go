package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/nodeplane/endpoint"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// Server is the console endpoint of one node's agent, an http.Handler.
// It needs a client whose scheme knows kubevirt.io/v1 and the client-go
// types, allowed to create tokenreviews and subjectaccessreviews (the
// ClusterRole system:auth-delegator) and to get virtualmachineinstances.
type Server struct {
	c      client.Client
	node   string
	opener Opener
	log    logr.Logger

	mu       sync.Mutex
	sessions map[string]bool // ns/name with a session open
}

// NewServer gives the console server of node nodeName, reading VMIs and
// reviewing tokens through c and opening consoles with opener; log may be
// the zero logr.Logger (discard).
func NewServer(c client.Client, nodeName string, opener Opener, log logr.Logger) *Server {
	return &Server{c: c, node: nodeName, opener: opener, log: log, sessions: map[string]bool{}}
}

// ServeHTTP serves GET nodeendpoint.ConsolePath(ns, name) with a WebSocket
// upgrade (subprotocol nodeendpoint.ConsoleSubprotocol). Refusals
// are plain-text lines with their status: 404 for another path or a VMI
// that does not exist, 405 for another method, 401 without a valid bearer
// token, 403 without RBAC, 409 for a VMI on another node, not Running, or
// with a console session already open, 502 when the console cannot be
// opened.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ns, name, ok := parsePath(r.URL.Path)
	if !ok {
		http.Error(w, fmt.Sprintf("console: no such path %s: want /v1/namespaces/NS/virtualmachineinstances/NAME/console", r.URL.Path), http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "console: method "+r.Method+": want GET with a WebSocket upgrade", http.StatusMethodNotAllowed)
		return
	}
	key := ns + "/" + name
	con, release, err := s.admit(r, ns, name)
	if err != nil {
		var he *endpoint.Refusal
		if !errors.As(err, &he) {
			he = refuse(http.StatusInternalServerError, "%v", err)
		}
		s.log.V(1).Info("console refused", "vmi", key, "status", he.Code, "reason", he.Message)
		http.Error(w, he.Message, he.Code)
		return
	}
	defer release()
	defer con.Close()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{nodeendpoint.ConsoleSubprotocol}, InsecureSkipVerify: true})
	if err != nil {
		s.log.Info("console upgrade failed", "vmi", key, "error", err.Error())
		return // Accept wrote the response
	}
	s.log.Info("console session opened", "vmi", key, "remote", r.RemoteAddr)
	reason := s.stream(r.Context(), ws, con)
	s.log.Info("console session closed", "vmi", key, "reason", reason)
}

// admit authenticates, authorizes and checks the VMI, then takes the
// VMI's session slot and opens its console; release frees the slot.
func (s *Server) admit(r *http.Request, ns, name string) (io.ReadCloser, func(), error) {
	ctx := r.Context()
	token, err := bearer(r)
	if err != nil {
		return nil, nil, err
	}
	user, err := authenticate(ctx, s.c, token)
	if err != nil {
		return nil, nil, err
	}
	if err := authorize(ctx, s.c, user, ns, name); err != nil {
		return nil, nil, err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, refuse(http.StatusNotFound, "console: VirtualMachineInstance %s/%s not found", ns, name)
		}
		return nil, nil, refuse(http.StatusInternalServerError, "console: VirtualMachineInstance %s/%s: %v", ns, name, err)
	}
	switch {
	case vmi.Status.NodeName != s.node:
		where := "is not scheduled yet"
		if vmi.Status.NodeName != "" {
			where = "runs on node " + vmi.Status.NodeName
		}
		return nil, nil, refuse(http.StatusConflict, "console: VirtualMachineInstance %s/%s %s, not on node %s", ns, name, where, s.node)
	case vmi.Status.Phase != kubevirtv1.Running:
		phase := string(vmi.Status.Phase)
		if phase == "" {
			phase = "none yet"
		}
		return nil, nil, refuse(http.StatusConflict, "console: VirtualMachineInstance %s/%s is not running (phase %s)", ns, name, phase)
	}
	key := ns + "/" + name
	s.mu.Lock()
	if s.sessions[key] {
		s.mu.Unlock()
		return nil, nil, refuse(http.StatusConflict, "console: VirtualMachineInstance %s/%s: an active console session exists; close it first", ns, name)
	}
	s.sessions[key] = true
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		delete(s.sessions, key)
		s.mu.Unlock()
	}
	con, err := s.opener.Open(ctx, domain.Name(ns, name))
	if err != nil {
		release()
		return nil, nil, refuse(http.StatusBadGateway, "console: VirtualMachineInstance %s/%s: opening the serial console: %v", ns, name, err)
	}
	return con, release, nil
}

// stream copies con to the client and the client's input to con (when con
// is writable) until either side ends, and says which.
func (s *Server) stream(ctx context.Context, ws *websocket.Conn, con io.ReadCloser) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	out := make(chan error, 1)
	go func() {
		_, err := io.Copy(nc, con)
		out <- err
	}()
	in := make(chan error, 1)
	go func() {
		dst := io.Discard
		if w, ok := con.(io.Writer); ok {
			dst = w
		}
		_, err := io.Copy(dst, nc)
		in <- err
	}()
	select {
	case err := <-out:
		// the console ended (domain stopped) or failed: tell the client why
		code, reason := websocket.StatusNormalClosure, "console ended: the domain stopped"
		if err != nil {
			code, reason = websocket.StatusInternalError, truncate("console failed: "+err.Error(), 120)
		}
		_ = ws.Close(code, reason)
		cancel()
		<-in
		return reason
	case err := <-in:
		_ = con.Close() // unblocks the output copy
		cancel()
		<-out
		_ = ws.CloseNow()
		if err != nil && websocket.CloseStatus(err) == -1 && !errors.Is(err, io.EOF) {
			return "client connection: " + err.Error()
		}
		return "client closed"
	}
}

// truncate keeps a close reason within the 123 bytes a close frame allows.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// parsePath splits /v1/namespaces/{ns}/virtualmachineinstances/{name}/console
// (nodeendpoint.ConsolePath).
func parsePath(p string) (ns, name string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) != 6 || parts[0] != "v1" || parts[1] != "namespaces" || parts[3] != "virtualmachineinstances" || parts[5] != "console" ||
		parts[2] == "" || parts[4] == "" {
		return "", "", false
	}
	return parts[2], parts[4], true
}
