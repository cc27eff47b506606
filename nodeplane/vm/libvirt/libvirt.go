// Package libvirt implements hypervisor.Hypervisor on libvirt through the
// cgo binding libvirt.org/go/libvirt (v1.10009.0, built against the
// system's libvirt-dev; libvirt 9.0 on Debian 12). It is the only converge
// package that imports the binding: its cgo build takes 40–60 s on a cold
// cache, so everything else depends on the hypervisor interface instead.
//
// URIs: qemu:///system for real guests (libvirtd must run), test:///default
// for libvirt's in-process test driver (no daemon, shared by every
// connection of the process, pre-populated with a domain "test"), or
// test:///abs/path.xml for a test driver with its own state per connection.
//
// A Conn survives daemon restarts: when libvirt reports the connection
// closed (its close callback: libvirtd exited or restarted, keepalive
// timeout) or it is no longer alive, the Conn opens a new one in the
// background, retrying with a backoff of 100 ms up to 5 s, and every
// method reconnects before use; Events subscriptions are re-registered on
// the new connection and get an Event of Type "Reconnected" so that their
// reader re-reads the domains. Calls made while the daemon is down fail
// with an error naming the URI.
package libvirt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	lv "libvirt.org/go/libvirt"

	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

var eventLoop sync.Once

// startEventLoop registers libvirt's default event loop implementation,
// which must happen before the first connection for events to work, and
// runs it for the life of the process.
func startEventLoop() {
	if err := lv.EventRegisterDefaultImpl(); err != nil {
		panic(fmt.Sprintf("libvirt: registering the default event loop: %v", err))
	}
	go func() {
		for {
			if err := lv.EventRunDefaultImpl(); err != nil {
				return
			}
		}
	}()
}

// Conn is a libvirt connection that implements hypervisor.Hypervisor and
// reconnects when the daemon restarts (see the package doc). It is safe
// for concurrent use.
type Conn struct {
	uri string

	mu           sync.Mutex
	conn         *lv.Connect // the current connection; replaced on reconnect
	closed       bool
	broken       bool // libvirt reported conn closed
	reconnects   int  // connections opened after the first
	subs         map[*subscription]bool
	reconnecting bool // a background reconnect loop runs
}

// subscription is one Events channel: its callback is registered again on
// every new connection.
type subscription struct {
	id   int // callback id on the current connection
	cb   lv.DomainEventLifecycleCallback
	send func(hypervisor.Event)
	end  func() // closes the channel
}

var _ hypervisor.Hypervisor = (*Conn)(nil)

// Connect opens uri (see the package doc). Errors name the URI.
func Connect(uri string) (*Conn, error) {
	eventLoop.Do(startEventLoop)
	c := &Conn{uri: uri, subs: map[*subscription]bool{}}
	conn, err := c.open()
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return c, nil
}

// open opens a new connection to c.uri that marks c broken when libvirt
// reports it closed.
func (c *Conn) open() (*lv.Connect, error) {
	conn, err := lv.NewConnect(c.uri)
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: connect: %w", c.uri, err)
	}
	// Called from the event loop: no locking nor libvirt calls there.
	if err := conn.RegisterCloseCallback(func(closed *lv.Connect, _ lv.ConnectCloseReason) { go c.onClosed(closed) }); err != nil {
		_, _ = conn.Close()
		return nil, fmt.Errorf("libvirt %s: register close callback: %w", c.uri, err)
	}
	return conn, nil
}

// onClosed marks c broken when closed is its current connection and runs
// the reconnect loop: attempts with a backoff of 100 ms doubling up to
// 5 s, until one succeeds or c is closed.
func (c *Conn) onClosed(closed *lv.Connect) {
	c.mu.Lock()
	if c.closed || c.reconnecting || c.conn == nil || *c.conn != *closed {
		c.mu.Unlock()
		return
	}
	c.broken, c.reconnecting = true, true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.reconnecting = false
		c.mu.Unlock()
	}()
	wait := 100 * time.Millisecond
	for {
		if _, err := c.current(); err == nil || errors.Is(err, errClosed) {
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Second)
	}
}

var errClosed = errors.New("connection closed")

// current gives the live connection, reconnecting first when libvirt
// reported it closed or it is no longer alive.
func (c *Conn) current() (*lv.Connect, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("libvirt %s: %w", c.uri, errClosed)
	}
	if !c.broken {
		if alive, err := c.conn.IsAlive(); err == nil && alive {
			return c.conn, nil
		}
	}
	conn, err := c.open()
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: reconnect: %w", c.uri, err)
	}
	old := c.conn
	c.conn, c.broken = conn, false
	c.reconnects++
	_ = old.UnregisterCloseCallback()
	for s := range c.subs {
		_ = old.DomainEventDeregister(s.id)
		id, err := conn.DomainEventLifecycleRegister(nil, s.cb)
		if err != nil {
			// the subscriber sees its channel end, as for a closed Conn
			delete(c.subs, s)
			s.end()
			continue
		}
		s.id = id
		s.send(hypervisor.Event{Type: hypervisor.EventReconnected, Detail: "libvirt " + c.uri + ": reconnected"})
	}
	_, _ = old.Close()
	return conn, nil
}

// Reconnects gives how many times c opened a new connection after the
// first (daemon restarts survived).
func (c *Conn) Reconnects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconnects
}

// URI gives the URI the connection was opened with.
func (c *Conn) URI() string { return c.uri }

// Version gives the libvirt library version as major*1,000,000 +
// minor*1,000 + release (9000000 for 9.0.0).
func (c *Conn) Version() (uint32, error) {
	conn, err := c.current()
	if err != nil {
		return 0, err
	}
	v, err := conn.GetLibVersion()
	if err != nil {
		return 0, fmt.Errorf("libvirt %s: version: %w", c.uri, err)
	}
	return v, nil
}

// Close ends every Events subscription, then closes the connection.
// Further calls are errors.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("libvirt %s: already closed", c.uri)
	}
	for s := range c.subs {
		_ = c.conn.DomainEventDeregister(s.id)
		s.end()
	}
	c.subs, c.closed = nil, true
	_ = c.conn.UnregisterCloseCallback()
	if _, err := c.conn.Close(); err != nil {
		return fmt.Errorf("libvirt %s: close: %w", c.uri, err)
	}
	return nil
}

func (c *Conn) wrap(op, name string, err error) error {
	var lerr lv.Error
	if errors.As(err, &lerr) && lerr.Code == lv.ERR_NO_DOMAIN {
		return fmt.Errorf("libvirt %s: domain %s: %s: %w (%v)", c.uri, name, op, hypervisor.ErrNotFound, err)
	}
	return fmt.Errorf("libvirt %s: domain %s: %s: %w", c.uri, name, op, err)
}

// withDomain looks name up, runs f and frees the handle.
func (c *Conn) withDomain(op, name string, f func(*lv.Domain) error) error {
	conn, err := c.current()
	if err != nil {
		return fmt.Errorf("domain %s: %s: %w", name, op, err)
	}
	d, err := conn.LookupDomainByName(name)
	if err != nil {
		return c.wrap(op, name, err)
	}
	defer d.Free()
	if err := f(d); err != nil {
		return c.wrap(op, name, err)
	}
	return nil
}

// Define defines (or redefines) a persistent domain from its XML.
func (c *Conn) Define(xml string) error {
	conn, err := c.current()
	if err != nil {
		return err
	}
	d, err := conn.DomainDefineXML(xml)
	if err != nil {
		return fmt.Errorf("libvirt %s: define: %w", c.uri, err)
	}
	return d.Free()
}

// Start boots a defined domain.
func (c *Conn) Start(name string) error {
	return c.withDomain("start", name, func(d *lv.Domain) error { return d.Create() })
}

// Shutdown asks the guest to power off and returns without waiting.
func (c *Conn) Shutdown(name string) error {
	return c.withDomain("shutdown", name, func(d *lv.Domain) error { return d.Shutdown() })
}

// Destroy stops the domain at once.
func (c *Conn) Destroy(name string) error {
	return c.withDomain("destroy", name, func(d *lv.Domain) error { return d.Destroy() })
}

// Undefine removes the definition with its NVRAM (EFI variables). Drivers
// that know no NVRAM (the test driver) refuse the flag as an invalid
// argument; the plain undefine follows then.
func (c *Conn) Undefine(name string) error {
	return c.withDomain("undefine", name, func(d *lv.Domain) error {
		err := d.UndefineFlags(lv.DOMAIN_UNDEFINE_NVRAM)
		var lerr lv.Error
		if errors.As(err, &lerr) && lerr.Code == lv.ERR_INVALID_ARG {
			return d.Undefine()
		}
		return err
	})
}

// BlockCapacity gives the capacity of the domain's disk dev
// (virDomainGetBlockInfo).
func (c *Conn) BlockCapacity(name, dev string) (uint64, error) {
	var n uint64
	err := c.withDomain("block info of "+dev, name, func(d *lv.Domain) error {
		info, err := d.GetBlockInfo(dev, 0)
		if err != nil {
			return err
		}
		n = info.Capacity
		return nil
	})
	return n, err
}

// BlockResize grows the domain's disk dev to bytes (virDomainBlockResize,
// VIR_DOMAIN_BLOCK_RESIZE_BYTES).
func (c *Conn) BlockResize(name, dev string, bytes uint64) error {
	return c.withDomain("block resize of "+dev, name, func(d *lv.Domain) error {
		return d.BlockResize(dev, bytes, lv.DOMAIN_BLOCK_RESIZE_BYTES)
	})
}

// Lookup gives the named domain's state and XML.
func (c *Conn) Lookup(name string) (hypervisor.Domain, error) {
	var out hypervisor.Domain
	err := c.withDomain("lookup", name, func(d *lv.Domain) error {
		var err error
		out, err = describe(d)
		return err
	})
	return out, err
}

// List gives every domain, defined or transient, running or not.
func (c *Conn) List() ([]hypervisor.Domain, error) {
	conn, err := c.current()
	if err != nil {
		return nil, err
	}
	doms, err := conn.ListAllDomains(0)
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: list domains: %w", c.uri, err)
	}
	var out []hypervisor.Domain
	var errs []error
	for i := range doms {
		d, err := describe(&doms[i])
		doms[i].Free()
		if err != nil {
			var lerr lv.Error
			if errors.As(err, &lerr) && lerr.Code == lv.ERR_NO_DOMAIN {
				continue // gone since the listing
			}
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("libvirt %s: list domains: %w", c.uri, errors.Join(errs...))
	}
	return out, nil
}

func describe(d *lv.Domain) (hypervisor.Domain, error) {
	name, err := d.GetName()
	if err != nil {
		return hypervisor.Domain{}, err
	}
	uuid, err := d.GetUUIDString()
	if err != nil {
		return hypervisor.Domain{}, fmt.Errorf("domain %s: uuid: %w", name, err)
	}
	state, reason, err := d.GetState()
	if err != nil {
		return hypervisor.Domain{}, fmt.Errorf("domain %s: state: %w", name, err)
	}
	xml, err := d.GetXMLDesc(0)
	if err != nil {
		return hypervisor.Domain{}, fmt.Errorf("domain %s: XML: %w", name, err)
	}
	s, r := foldState(state, reason)
	return hypervisor.Domain{Name: name, UUID: uuid, State: s, Reason: r, XML: xml}, nil
}

// foldState maps libvirt's state and reason to the hypervisor package's.
func foldState(state lv.DomainState, reason int) (hypervisor.State, hypervisor.Reason) {
	switch state {
	case lv.DOMAIN_RUNNING, lv.DOMAIN_BLOCKED:
		return hypervisor.Running, hypervisor.ReasonNone
	case lv.DOMAIN_PAUSED, lv.DOMAIN_PMSUSPENDED:
		return hypervisor.Paused, hypervisor.ReasonNone
	case lv.DOMAIN_SHUTDOWN:
		return hypervisor.ShuttingDown, hypervisor.ReasonNone
	case lv.DOMAIN_CRASHED:
		return hypervisor.Crashed, hypervisor.ReasonCrashed
	case lv.DOMAIN_SHUTOFF:
		switch lv.DomainShutoffReason(reason) {
		case lv.DOMAIN_SHUTOFF_UNKNOWN:
			return hypervisor.Shutoff, hypervisor.ReasonNone
		case lv.DOMAIN_SHUTOFF_SHUTDOWN:
			return hypervisor.Shutoff, hypervisor.ReasonShutdown
		case lv.DOMAIN_SHUTOFF_DESTROYED:
			return hypervisor.Shutoff, hypervisor.ReasonDestroyed
		case lv.DOMAIN_SHUTOFF_CRASHED:
			return hypervisor.Shutoff, hypervisor.ReasonCrashed
		case lv.DOMAIN_SHUTOFF_FAILED:
			return hypervisor.Shutoff, hypervisor.ReasonFailed
		}
		return hypervisor.Shutoff, hypervisor.ReasonOther
	}
	return hypervisor.Unknown, hypervisor.ReasonNone
}

var eventTypes = map[lv.DomainEventType]string{
	lv.DOMAIN_EVENT_DEFINED:     "Defined",
	lv.DOMAIN_EVENT_UNDEFINED:   "Undefined",
	lv.DOMAIN_EVENT_STARTED:     "Started",
	lv.DOMAIN_EVENT_SUSPENDED:   "Suspended",
	lv.DOMAIN_EVENT_RESUMED:     "Resumed",
	lv.DOMAIN_EVENT_STOPPED:     "Stopped",
	lv.DOMAIN_EVENT_SHUTDOWN:    "Shutdown",
	lv.DOMAIN_EVENT_PMSUSPENDED: "PMSuspended",
	lv.DOMAIN_EVENT_CRASHED:     "Crashed",
}

// Events delivers the connection's domain lifecycle events until ctx ends
// or the connection is closed, then closes the channel; after a reconnect
// it delivers an Event of Type "Reconnected" (no Name), since events of
// the time the daemon was away are lost. Up to 256 events are buffered;
// further ones are dropped until the receiver catches up (they only
// prompt a re-read).
func (c *Conn) Events(ctx context.Context) (<-chan hypervisor.Event, error) {
	ch := make(chan hypervisor.Event, 256)
	var chMu sync.Mutex
	ended := false
	send := func(e hypervisor.Event) {
		chMu.Lock()
		defer chMu.Unlock()
		if ended {
			return
		}
		select {
		case ch <- e:
		default:
		}
	}
	end := func() {
		chMu.Lock()
		defer chMu.Unlock()
		if !ended {
			ended = true
			close(ch)
		}
	}
	s := &subscription{send: send, end: end, cb: func(_ *lv.Connect, d *lv.Domain, ev *lv.DomainEventLifecycle) {
		name, _ := d.GetName()
		send(hypervisor.Event{Name: name, Type: eventTypes[ev.Event], Detail: ev.String()})
	}}
	if _, err := c.current(); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("libvirt %s: events: connection closed", c.uri)
	}
	id, err := c.conn.DomainEventLifecycleRegister(nil, s.cb)
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: register lifecycle events: %w", c.uri, err)
	}
	s.id = id
	c.subs[s] = true
	go func() {
		<-ctx.Done()
		c.mu.Lock()
		if c.subs[s] {
			_ = c.conn.DomainEventDeregister(s.id)
			delete(c.subs, s)
		}
		c.mu.Unlock()
		end()
	}()
	return ch, nil
}
