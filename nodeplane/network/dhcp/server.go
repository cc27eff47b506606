package dhcp

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/go-logr/logr"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
)

// Server is a running DHCPv4 server for one Lease.
type Server struct {
	srv    *server4.Server
	lease  Lease
	ifName string
	netns  string
	log    logr.Logger
	done   chan struct{}
	once   sync.Once
	err    error // why Serve ended, once done is closed
	closed bool
	mu     sync.Mutex
}

// Serve starts a server answering l's client on interface ifName of the
// network namespace at netnsPath (empty: the caller's): the socket
// (UDP port 67, bound to the interface, broadcast allowed) is made in
// that namespace and keeps to it, and the server runs in a goroutine of
// its own until Close. Replies go to the client's address when it has
// one, else they are broadcast on the interface. log gets one line per
// reply and the reason the server stopped, if not closed.
func Serve(netnsPath, ifName string, l Lease, log logr.Logger) (*Server, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	s := &Server{lease: l, ifName: ifName, netns: netnsPath, log: log, done: make(chan struct{})}
	listen := func() error {
		var err error
		s.srv, err = server4.NewServer(ifName, &net.UDPAddr{IP: net.IPv4zero, Port: dhcpv4.ServerPort}, s.handle)
		return err
	}
	var err error
	if netnsPath == "" {
		err = listen()
	} else {
		err = ns.WithNetNSPath(netnsPath, func(ns.NetNS) error { return listen() })
	}
	if err != nil {
		return nil, fmt.Errorf("DHCP server for %s on %s in %s: %w", l.ClientMAC, ifName, netnsPath, err)
	}
	go func() {
		err := s.srv.Serve()
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			err = nil
		} else {
			s.log.Error(err, "DHCP server stopped", "mac", l.ClientMAC.String(), "interface", ifName, "netns", netnsPath)
		}
		s.err = err
		close(s.done)
	}()
	return s, nil
}

func (s *Server) handle(conn net.PacketConn, peer net.Addr, req *dhcpv4.DHCPv4) {
	resp, err := Reply(req, s.lease)
	if err != nil {
		s.log.Error(err, "DHCP reply", "mac", req.ClientHWAddr.String(), "interface", s.ifName)
		return
	}
	if resp == nil {
		return
	}
	if _, err := conn.WriteTo(resp.ToBytes(), peer); err != nil {
		s.log.Error(err, "DHCP reply", "mac", req.ClientHWAddr.String(), "interface", s.ifName, "to", peer.String())
		return
	}
	s.log.V(1).Info("DHCP reply", "type", resp.MessageType().String(), "mac", req.ClientHWAddr.String(), "address", s.lease.Address.String(), "interface", s.ifName, "netns", s.netns)
}

// Lease gives the lease the server offers.
func (s *Server) Lease() Lease { return s.lease }

// Done is closed once the server stopped (Close, or its socket failed).
func (s *Server) Done() <-chan struct{} { return s.done }

// Running reports whether the server still serves.
func (s *Server) Running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Err gives why a stopped server stopped (nil after Close).
func (s *Server) Err() error {
	<-s.done
	return s.err
}

// Close stops the server and waits for its goroutine; it is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		err = s.srv.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	<-s.done
	return err
}
