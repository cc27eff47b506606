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
// way `virsh console` does, and gives it as an io.ReadWriteCloser: Read
// gives the guest's output, Write types into the guest's serial port.
// DOMAIN_CONSOLE_FORCE takes the console over from any other client,
// which then sees end of file. Read blocks until the guest writes, gives
// io.EOF when the domain stops, and an error naming the domain otherwise;
// Write blocks until libvirt took all of p (a serial port is slow: the
// stream pushes back) and gives an error naming the domain when the
// stream ended. Close detaches (a blocked Read or Write returns
// io.ErrClosedPipe). Output the guest wrote before the console was opened
// is not replayed: read the serial log file for that.
//
// The stream is opened with STREAM_NONBLOCK (virStreamRecv and
// virStreamSend then give -2 instead of blocking) and woken by the
// connection's event loop (virStreamEventAddCallback), so that Close never
// aborts a stream another goroutine is blocked in (libvirt warns about
// that and may crash). The connection is the current one (c.current):
// a console opened before a daemon restart ends with an error, and the
// caller opens a new one.
func (c *Conn) OpenConsole(name string) (io.ReadWriteCloser, error) {
	conn, err := c.current()
	if err != nil {
		return nil, fmt.Errorf("domain %s: console: %w", name, err)
	}
	st, err := conn.NewStream(lv.STREAM_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: domain %s: console: new stream: %w", c.uri, name, err)
	}
	d, err := conn.LookupDomainByName(name)
	if err != nil {
		_ = st.Free()
		return nil, c.wrap("console", name, err)
	}
	err = d.OpenConsole("", st, lv.DOMAIN_CONSOLE_FORCE)
	_ = d.Free()
	if err != nil {
		_ = st.Free()
		return nil, c.wrap("console", name, err)
	}
	con := &console{uri: c.uri, name: name, st: st,
		readable: make(chan struct{}, 1), writable: make(chan struct{}, 1), done: make(chan struct{})}
	if err := st.EventAddCallback(readEvents, con.onEvent); err != nil {
		_ = st.Abort()
		_ = st.Free()
		return nil, fmt.Errorf("libvirt %s: domain %s: console: watch stream: %w", c.uri, name, err)
	}
	return con, nil
}

// readEvents are the stream events always watched; STREAM_EVENT_WRITABLE
// is added only while a Write waits (a stream is nearly always writable:
// watching it all the time would spin the event loop).
const readEvents = lv.STREAM_EVENT_READABLE | lv.STREAM_EVENT_ERROR | lv.STREAM_EVENT_HANGUP

// console is the io.ReadWriteCloser OpenConsole gives.
type console struct {
	uri, name string
	st        *lv.Stream
	readable  chan struct{} // the stream may have data (buffered: no lost wake-up)
	writable  chan struct{} // the stream may take data
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	writeMu   sync.Mutex // one Write at a time: its bytes stay in order

	mu       sync.Mutex // serialises Recv, Send, the callback's events and the stream's end
	closed   bool
	ended    bool // Recv/Send gave end of file or an error: Abort may complain
	watching bool // STREAM_EVENT_WRITABLE is watched
}

// onEvent runs on the event loop: it only wakes the waiters.
func (c *console) onEvent(_ *lv.Stream, ev lv.StreamEventType) {
	if ev&(lv.STREAM_EVENT_READABLE|lv.STREAM_EVENT_ERROR|lv.STREAM_EVENT_HANGUP) != 0 {
		notify(c.readable)
	}
	if ev&(lv.STREAM_EVENT_WRITABLE|lv.STREAM_EVENT_ERROR|lv.STREAM_EVENT_HANGUP) != 0 {
		notify(c.writable)
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// again reports whether err is virStream{Recv,Send}'s -2 (would block),
// which the binding reports as an error with code VIR_ERR_OK.
func again(err error) bool {
	var lerr lv.Error
	return errors.As(err, &lerr) && lerr.Code == lv.ERR_OK
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
		switch {
		case err == nil:
			c.mu.Unlock()
			return n, nil
		case errors.Is(err, io.EOF):
			c.ended = true
			c.mu.Unlock()
			return 0, io.EOF
		case again(err):
			c.mu.Unlock()
		default:
			c.ended = true
			c.mu.Unlock()
			return 0, fmt.Errorf("libvirt %s: domain %s: console: %w", c.uri, c.name, err)
		}
		select {
		case <-c.readable:
		case <-c.done:
			return 0, io.ErrClosedPipe
		}
	}
}

// Write sends p to the guest's console, all of it unless an error
// occurs.
func (c *console) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	written := 0
	for written < len(p) {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return written, io.ErrClosedPipe
		}
		n, err := c.st.Send(p[written:])
		switch {
		case err == nil:
			written += n
			c.mu.Unlock()
			continue
		case again(err):
			if !c.watching {
				if uerr := c.st.EventUpdateCallback(readEvents | lv.STREAM_EVENT_WRITABLE); uerr != nil {
					c.mu.Unlock()
					return written, fmt.Errorf("libvirt %s: domain %s: console: watch stream for writing: %w", c.uri, c.name, uerr)
				}
				c.watching = true
			}
			c.mu.Unlock()
		default: // io.EOF (0 bytes taken) or an error: the stream ended
			c.ended = true
			c.mu.Unlock()
			return written, fmt.Errorf("libvirt %s: domain %s: console: writing: %w", c.uri, c.name, err)
		}
		select {
		case <-c.writable:
		case <-c.done:
			return written, io.ErrClosedPipe
		}
		c.mu.Lock()
		if c.watching && !c.closed {
			_ = c.st.EventUpdateCallback(readEvents)
			c.watching = false
		}
		c.mu.Unlock()
	}
	return written, nil
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
