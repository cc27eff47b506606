package libvirt

import (
	"errors"
	"fmt"
	"io"
	"sync"

	lv "libvirt.org/go/libvirt"
)

// OpenConsole attaches to the first console of the running domain name
// (its serial port for converge's domains) through a libvirt stream, the
// way `virsh console` does, and gives the guest's output as a reader.
// DOMAIN_CONSOLE_FORCE takes the console over from any other client,
// which then sees end of file. Read blocks until the guest writes, gives
// io.EOF when the domain stops, and an error naming the domain otherwise;
// Close detaches (a blocked Read returns io.ErrClosedPipe). Output the
// guest wrote before the console was opened is not replayed: read the
// serial log file for that.
//
// The stream is non-blocking and woken by the connection's event loop, so
// that Close never aborts a stream another goroutine is blocked in (libvirt
// warns about that and may crash).
func (c *Conn) OpenConsole(name string) (io.ReadCloser, error) {
	st, err := c.conn.NewStream(lv.STREAM_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: domain %s: console: new stream: %w", c.uri, name, err)
	}
	if err := c.withDomain("console", name, func(d *lv.Domain) error {
		return d.OpenConsole("", st, lv.DOMAIN_CONSOLE_FORCE)
	}); err != nil {
		_ = st.Free()
		return nil, err
	}
	con := &console{uri: c.uri, name: name, st: st, ready: make(chan struct{}, 1), done: make(chan struct{})}
	events := lv.STREAM_EVENT_READABLE | lv.STREAM_EVENT_ERROR | lv.STREAM_EVENT_HANGUP
	if err := st.EventAddCallback(events, func(*lv.Stream, lv.StreamEventType) { con.wake() }); err != nil {
		_ = st.Abort()
		_ = st.Free()
		return nil, fmt.Errorf("libvirt %s: domain %s: console: watch stream: %w", c.uri, name, err)
	}
	return con, nil
}

// console is the io.ReadCloser OpenConsole gives.
type console struct {
	uri, name string
	st        *lv.Stream
	ready     chan struct{} // the stream may have data (buffered: no lost wake-up)
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	mu     sync.Mutex // serialises Recv and the stream's end
	closed bool
	ended  bool // Recv gave end of file or an error: Abort may complain
}

func (c *console) wake() {
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

func (c *console) end() {
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
}

// Read gives the next bytes the guest wrote.
func (c *console) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, io.ErrClosedPipe
		}
		n, err := c.st.Recv(p)
		c.mu.Unlock()
		var lerr lv.Error
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, io.EOF):
			c.end()
			return 0, io.EOF
		case errors.As(err, &lerr) && lerr.Code == lv.ERR_OK:
			// -2 from virStreamRecv: nothing yet; the binding reports it as
			// an error without a code
		default:
			c.end()
			return 0, fmt.Errorf("libvirt %s: domain %s: console: %w", c.uri, c.name, err)
		}
		select {
		case <-c.ready:
		case <-c.done:
			return 0, io.ErrClosedPipe
		}
	}
}

// Close detaches from the console. Further calls return nil.
func (c *console) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.done)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.closed = true
		_ = c.st.EventRemoveCallback()
		if aerr := c.st.Abort(); aerr != nil && !c.ended {
			err = fmt.Errorf("libvirt %s: domain %s: console: close: %w", c.uri, c.name, aerr)
		}
		_ = c.st.Free()
	})
	return err
}
