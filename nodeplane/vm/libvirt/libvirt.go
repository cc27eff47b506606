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
package libvirt

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// Conn is a libvirt connection that implements hypervisor.Hypervisor.
// It is safe for concurrent use.
type Conn struct {
	uri  string
	conn *lv.Connect

	mu     sync.Mutex
	closed bool
	events map[int]func() // callback id -> closes its channel
}

var _ hypervisor.Hypervisor = (*Conn)(nil)

// Connect opens uri (see the package doc). Errors name the URI.
func Connect(uri string) (*Conn, error) {
	eventLoop.Do(startEventLoop)
	c, err := lv.NewConnect(uri)
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: connect: %w", uri, err)
	}
	return &Conn{uri: uri, conn: c, events: map[int]func(){}}, nil
}

// URI gives the URI the connection was opened with.
func (c *Conn) URI() string { return c.uri }

// Version gives the libvirt library version as major*1,000,000 +
// minor*1,000 + release (9000000 for 9.0.0).
func (c *Conn) Version() (uint32, error) {
	v, err := c.conn.GetLibVersion()
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
	for id, end := range c.events {
		_ = c.conn.DomainEventDeregister(id)
		end()
	}
	c.events, c.closed = nil, true
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
	d, err := c.conn.LookupDomainByName(name)
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
	d, err := c.conn.DomainDefineXML(xml)
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
	doms, err := c.conn.ListAllDomains(0)
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
// or the connection is closed, then closes the channel. Up to 256 events
// are buffered; further ones are dropped until the receiver catches up
// (they only prompt a re-read).
func (c *Conn) Events(ctx context.Context) (<-chan hypervisor.Event, error) {
	ch := make(chan hypervisor.Event, 256)
	var chMu sync.Mutex
	ended := false
	end := func() {
		chMu.Lock()
		defer chMu.Unlock()
		if !ended {
			ended = true
			close(ch)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("libvirt %s: events: connection closed", c.uri)
	}
	id, err := c.conn.DomainEventLifecycleRegister(nil, func(_ *lv.Connect, d *lv.Domain, ev *lv.DomainEventLifecycle) {
		name, _ := d.GetName()
		chMu.Lock()
		defer chMu.Unlock()
		if ended {
			return
		}
		select {
		case ch <- hypervisor.Event{Name: name, Type: eventTypes[ev.Event], Detail: ev.String()}:
		default:
		}
	})
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: register lifecycle events: %w", c.uri, err)
	}
	c.events[id] = end
	go func() {
		<-ctx.Done()
		c.mu.Lock()
		if _, live := c.events[id]; live {
			_ = c.conn.DomainEventDeregister(id)
			delete(c.events, id)
		}
		c.mu.Unlock()
		end()
	}()
	return ch, nil
}
