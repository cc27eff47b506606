package libvirtd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Daemons are a running virtlogd and libvirtd started by Start.
type Daemons struct {
	opts     Options
	virtlogd *process
	libvirtd *process
	// died is closed when the first of the two exits.
	died     chan struct{}
	diedOnce sync.Once
	first    *process // the first to exit
	stopOnce sync.Once
	stopErr  error
	reaper   *reaper
}

// process is one daemon.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *lineWriter
	done chan struct{} // closed when it exited and was reaped
	err  error         // cmd.Wait's result, valid after done
}

// URI is the libvirt URI of the running libvirtd (Options.URI).
func (d *Daemons) URI() string { return d.opts.URI() }

// Pids gives the process IDs of virtlogd and libvirtd.
func (d *Daemons) Pids() (virtlogd, libvirtd int) {
	return d.virtlogd.cmd.Process.Pid, d.libvirtd.cmd.Process.Pid
}

// Died is closed when either daemon has exited on its own or was
// stopped; Err then says which and how.
func (d *Daemons) Died() <-chan struct{} { return d.died }

// Err gives, once Died is closed, the error of the daemon that exited
// first: "<name> exited: <status>".
func (d *Daemons) Err() error {
	select {
	case <-d.died:
	default:
		return nil
	}
	p := d.first
	if p.err == nil {
		return fmt.Errorf("%s exited with status 0", p.name)
	}
	return fmt.Errorf("%s exited: %w", p.name, p.err)
}

// Start checks the host (Check), prepares o's directories and
// configuration, starts virtlogd, waits until its socket accepts
// connections, starts libvirtd and waits until <SocketDir>/libvirt-sock
// exists, each within o.StartTimeout (clients retry a refused connection
// for the moment between its bind and listen). Both run in their own
// process group (a terminal's Ctrl-C does not reach them) and get SIGTERM
// if the caller dies. On error nothing is left running.
func Start(ctx context.Context, o Options) (*Daemons, error) {
	if o.Output == nil {
		o.Output = os.Stderr
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := Check(o); err != nil {
		return nil, err
	}
	if err := prepareDirs(o); err != nil {
		return nil, err
	}
	d := &Daemons{opts: o, died: make(chan struct{})}
	if o.ReapOrphans {
		d.reaper = startReaper()
	}
	started := make(chan error, 1)
	// The daemons are started from a thread of their own, moved into the
	// mount (and network) namespace and kept until both have exited: a
	// child's parent-death signal follows the thread that started it.
	onOwnThread(func() {
		if err := enterNamespaces(o); err != nil {
			started <- err
			return
		}
		if err := d.spawn(ctx); err != nil {
			started <- err
			return
		}
		started <- nil
		<-d.virtlogd.done
		<-d.libvirtd.done
	})
	if err := <-started; err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// spawn starts virtlogd, waits for its socket, then libvirtd and waits for
// its socket; it runs on the namespace thread.
func (d *Daemons) spawn(ctx context.Context) error {
	o := d.opts
	var err error
	d.virtlogd, err = d.start("virtlogd", o.Virtlogd,
		"--config", filepath.Join(o.RunDir, "virtlogd.conf"), "--pid-file", filepath.Join(o.RunDir, "virtlogd.pid"))
	if err != nil {
		return err
	}
	if err := d.waitSocket(ctx, d.virtlogd, o.logdSocket(), true); err != nil {
		return err
	}
	d.libvirtd, err = d.start("libvirtd", o.Libvirtd,
		"--config", filepath.Join(o.RunDir, "libvirtd.conf"), "--pid-file", filepath.Join(o.RunDir, "libvirtd.pid"))
	if err != nil {
		return err
	}
	// libvirtd logs an error for every connection closed without a
	// message, so its socket is only checked for existence: it binds it
	// just before it listens, and clients retry.
	return d.waitSocket(ctx, d.libvirtd, o.socket(), false)
}

// start runs one daemon in the foreground, its output forwarded.
func (d *Daemons) start(name, bin string, args ...string) (*process, error) {
	p := &process{name: name, out: newLineWriter(d.opts.Output, name+": "), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(os.Environ(), "LC_ALL=C")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	start := func() (int, error) {
		if err := p.cmd.Start(); err != nil {
			return 0, fmt.Errorf("starting %s: %w", name, err)
		}
		return p.cmd.Process.Pid, nil
	}
	var err error
	if d.reaper != nil {
		err = d.reaper.startKept(start)
	} else {
		_, err = start()
	}
	if err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		p.out.Flush()
		close(p.done)
		d.diedOnce.Do(func() { d.first = p; close(d.died) })
	}()
	return p, nil
}

// waitSocket polls path until it is a socket (and, with dial, accepts a
// connection), p exits, ctx ends or the start timeout passes.
func (d *Daemons) waitSocket(ctx context.Context, p *process, path string, dial bool) error {
	deadline := time.Now().Add(d.opts.StartTimeout)
	for {
		if st, err := os.Stat(path); err == nil && st.Mode().Type() == os.ModeSocket {
			if !dial {
				return nil
			}
			if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
				c.Close()
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s accepted connections: %v (its output is above)", p.name, path, p.err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s on %s: %w", p.name, path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s did not accept connections within %s", p.name, path, d.opts.StartTimeout)
		}
	}
}

// Stop stops libvirtd, then virtlogd: SIGTERM, then SIGKILL after
// StopTimeout, and waits until both have exited. It returns an error
// when one had to be killed. QEMU processes are left running (a new
// libvirtd re-attaches to them). Stop is idempotent.
func (d *Daemons) Stop() error {
	d.stopOnce.Do(func() {
		var errs []error
		for _, p := range []*process{d.libvirtd, d.virtlogd} {
			if p == nil {
				continue
			}
			if err := p.stop(d.opts.StopTimeout); err != nil {
				errs = append(errs, err)
			}
		}
		if d.reaper != nil {
			d.reaper.stop()
		}
		d.stopErr = errors.Join(errs...)
	})
	return d.stopErr
}

// stop sends SIGTERM and waits, then SIGKILL.
func (p *process) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s (pid %d) ignored SIGTERM for %s: killed", p.name, p.cmd.Process.Pid, timeout)
}

// Run starts the daemons (Start), reports ready through onReady (may be
// nil) and supervises them until ctx ends, when it stops both and returns
// nil, or until either exits on its own, when it stops the other and
// returns the error naming the one that died, so that the caller exits
// non-zero and the kubelet restarts the container.
func Run(ctx context.Context, o Options, onReady func(*Daemons)) error {
	d, err := Start(ctx, o)
	if err != nil {
		return err
	}
	if onReady != nil {
		onReady(d)
	}
	select {
	case <-ctx.Done():
		return d.Stop()
	case <-d.Died():
		died := d.Err()
		if err := d.Stop(); err != nil {
			return errors.Join(died, err)
		}
		return died
	}
}

// onOwnThread runs f in a new goroutine locked to an OS thread that is
// not the process's main thread and that ends with it (never unlocked):
// f may change the thread's namespaces without the rest of the process,
// or /proc/self (the main thread's view), seeing it.
func onOwnThread(f func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f()
			return // the thread ends with the goroutine
		}
		// On the main thread: hold it until another goroutine has locked
		// another thread, and give it back unchanged.
		locked := make(chan struct{})
		onOwnThread(func() { close(locked); f() })
		<-locked
		runtime.UnlockOSThread()
	}()
}
