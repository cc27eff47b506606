package libvirtd

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// libvirt's compiled-in directories of a privileged daemon (Debian 12:
// runstatedir /run, localstatedir /var, sysconfdir /etc).
const (
	libvirtRunDir   = "/run/libvirt"
	libvirtStateDir = "/var/lib/libvirt"
	libvirtConfDir  = "/etc/libvirt"
	libvirtLogDir   = "/var/log/libvirt"
)

// QEMUUser is the user libvirtd resolves at start (compiled in): it must
// exist in /etc/passwd even though QEMU runs as root (qemu.conf user =
// "root" is read only after that lookup).
const QEMUUser = "libvirt-qemu"

// Options configure Start. Start from DefaultOptions.
type Options struct {
	// RunDir receives the configuration files and the daemons' pid files,
	// written at every start.
	RunDir string
	// SocketDir holds libvirtd's unix sockets (libvirt-sock, …) and
	// virtlogd's; it is libvirt's /run/libvirt for the daemons. The VM
	// agent connects to <SocketDir>/libvirt-sock (URI).
	SocketDir string
	// StateDir is libvirt's /var/lib/libvirt for the daemons; StateDir/etc
	// is their /etc/libvirt (persistent domain definitions).
	StateDir string
	// LogDir is libvirt's /var/log/libvirt (QEMU's own logs,
	// qemu/<domain>.log, written through virtlogd).
	LogDir string
	// Libvirtd and Virtlogd are the daemons' binaries (names on PATH or
	// absolute paths).
	Libvirtd, Virtlogd string
	// Netns is the path of a network namespace to run the daemons (and so
	// every QEMU and tap) in; empty runs them in the caller's.
	Netns string
	// Output receives the daemons' output, each line prefixed with
	// "virtlogd: " or "libvirtd: "; nil is os.Stderr.
	Output io.Writer
	// StartTimeout bounds the wait for each daemon's socket to accept
	// connections (the first start probes QEMU's capabilities, ~8 s).
	StartTimeout time.Duration
	// StopTimeout is how long each daemon gets after SIGTERM before
	// SIGKILL.
	StopTimeout time.Duration
	// ReapOrphans makes the supervisor reap the zombies re-parented to it
	// (QEMU daemonizes): set it when the process is a container's PID 1 or
	// a child subreaper and starts no other children than the daemons.
	ReapOrphans bool
}

// DefaultOptions gives libvirt's own directories (/var/run/libvirt for
// the sockets, /var/lib/libvirt, /var/log/libvirt), the run directory
// /run/converge-node/libvirtd, libvirtd and virtlogd from PATH, output to
// stderr, 2 min to start and 30 s to stop each daemon.
func DefaultOptions() Options {
	return Options{
		RunDir:       "/run/converge-node/libvirtd",
		SocketDir:    "/var/run/libvirt",
		StateDir:     libvirtStateDir,
		LogDir:       libvirtLogDir,
		Libvirtd:     "libvirtd",
		Virtlogd:     "virtlogd",
		StartTimeout: 2 * time.Minute,
		StopTimeout:  30 * time.Second,
	}
}

// URI gives the libvirt URI of the daemon these options run:
// qemu:///system, with ?socket=<SocketDir>/libvirt-sock unless SocketDir
// is libvirt's own /run/libvirt (or /var/run/libvirt).
func (o Options) URI() string {
	if sameDir(o.SocketDir, libvirtRunDir) {
		return "qemu:///system"
	}
	return "qemu:///system?socket=" + o.socket()
}

// socket is libvirtd's read-write socket.
func (o Options) socket() string { return filepath.Join(o.SocketDir, "libvirt-sock") }

// logdSocket is virtlogd's socket.
func (o Options) logdSocket() string { return filepath.Join(o.SocketDir, "virtlogd-sock") }

// Validate checks o: every directory absolute and clean, the socket,
// state and log directories distinct, both binaries named, positive
// timeouts. Errors name the field.
func (o Options) Validate() error {
	var errs []error
	dirs := []struct{ name, path string }{
		{"run directory", o.RunDir}, {"socket directory", o.SocketDir},
		{"state directory", o.StateDir}, {"log directory", o.LogDir},
	}
	for _, d := range dirs {
		if d.path == "" || !filepath.IsAbs(d.path) || filepath.Clean(d.path) != d.path || d.path == "/" || strings.ContainsRune(d.path, 0) {
			errs = append(errs, fmt.Errorf("%s %q: expected an absolute, clean path other than /", d.name, d.path))
		}
	}
	for i := range dirs {
		for _, d := range dirs[i+1:] {
			if dirs[i].path != "" && filepath.Clean(dirs[i].path) == filepath.Clean(d.path) {
				errs = append(errs, fmt.Errorf("%s and %s are both %s: expected distinct directories", dirs[i].name, d.name, d.path))
			}
		}
	}
	if o.Libvirtd == "" || o.Virtlogd == "" {
		errs = append(errs, errors.New("libvirtd and virtlogd binaries: required"))
	}
	if o.StartTimeout <= 0 || o.StopTimeout <= 0 {
		errs = append(errs, fmt.Errorf("start timeout %s, stop timeout %s: expected positive durations", o.StartTimeout, o.StopTimeout))
	}
	if o.Netns != "" && !filepath.IsAbs(o.Netns) {
		errs = append(errs, fmt.Errorf("network namespace %q: expected an absolute path such as /run/netns/NAME", o.Netns))
	}
	return errors.Join(errs...)
}

// sameDir reports whether a and b name the same directory once symbolic
// links in their existing part are followed (/var/run is /run on Debian),
// whether or not the directories exist yet.
func sameDir(a, b string) bool { return resolve(a) == resolve(b) }

// resolve gives p with the symbolic links of its longest existing prefix
// followed.
func resolve(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
