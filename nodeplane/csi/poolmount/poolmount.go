//go:build linux

package poolmount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Options are what Keep takes.
type Options struct {
	// Source is the directory to show at Target: the PVC's mount in the
	// container (upstream's --storagePoolPath /source). It must be a
	// mount point, so that a PVC the kubelet did not mount is never
	// replaced by the container's own directory.
	Source string
	// Target is where Source is bind-mounted (upstream's --mountPath
	// <pool path>/csi), created when missing; its parent should be a
	// host path mounted with Bidirectional propagation.
	Target string
	// Interval is how often Keep checks that Target still shows Source
	// and binds it again when not (upstream's mounter checks every
	// second).
	Interval time.Duration
}

// DefaultOptions check every 10 s; Source and Target are the caller's.
func DefaultOptions() Options { return Options{Interval: 10 * time.Second} }

// Validate checks o: absolute, clean, distinct paths, neither inside the
// other, and a positive Interval. The error names the option.
func (o Options) Validate() error {
	var errs []error
	for _, p := range []struct{ name, path string }{{"source", o.Source}, {"target", o.Target}} {
		if !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path || p.path == "/" {
			errs = append(errs, fmt.Errorf("%s %q: expected an absolute, clean path other than /", p.name, p.path))
		}
	}
	if len(errs) == 0 && (within(o.Source, o.Target) || within(o.Target, o.Source)) {
		errs = append(errs, fmt.Errorf("source %q and target %q: one contains the other", o.Source, o.Target))
	}
	if o.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval %s: expected a positive duration", o.Interval))
	}
	return errors.Join(errs...)
}

// within reports whether the clean absolute path p is dir or under it.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// Bind makes target show source: it creates target (0750) when missing,
// does nothing when target is a mount point showing source's directory
// already (the same device and inode: a mount kept by an earlier run, or
// upstream's mounter's bind of the same PVC), unmounts whatever else is
// mounted there (a stale mount of an earlier claim) and bind-mounts
// source onto it. It reports whether it mounted. source must be a mount
// point.
func Bind(source, target string) (bool, error) {
	src, err := mountsAt(source)
	if err != nil {
		return false, err
	}
	if len(src) == 0 {
		return false, fmt.Errorf("source %s is not a mount point: the PVC is not mounted there", source)
	}
	if fi, err := os.Stat(source); err != nil {
		return false, fmt.Errorf("source: %w", err)
	} else if !fi.IsDir() {
		return false, fmt.Errorf("source %s is not a directory (a filesystem volume is needed)", source)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return false, fmt.Errorf("target: %w", err)
	}
	shows, mounted, err := Shows(source, target)
	if err != nil {
		return false, err
	}
	if shows {
		return false, nil
	}
	if mounted {
		if err := Unmount(target); err != nil {
			return false, fmt.Errorf("target %s: unmounting what was mounted there before: %w", target, err)
		}
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return false, fmt.Errorf("bind-mounting %s on %s: %w", source, target, err)
	}
	return true, nil
}

// Shows reports whether target is a mount point (mounted) and whether it
// shows source's directory (shows: the same device and inode).
func Shows(source, target string) (shows, mounted bool, err error) {
	at, err := mountsAt(target)
	if err != nil {
		return false, false, err
	}
	if len(at) == 0 {
		return false, false, nil
	}
	var s, t unix.Stat_t
	if err := unix.Stat(source, &s); err != nil {
		return false, true, fmt.Errorf("source %s: %w", source, err)
	}
	if err := unix.Stat(target, &t); err != nil {
		return false, true, fmt.Errorf("target %s: %w", target, err)
	}
	return s.Dev == t.Dev && s.Ino == t.Ino, true, nil
}

// Unmount unmounts every mount at target, the last first; a busy one
// (a loop device's backing file open under it) is detached lazily
// (MNT_DETACH: gone from the tree, released when no longer used). A
// target that is not a mount point, or does not exist, is left as is.
func Unmount(target string) error {
	for {
		at, err := mountsAt(target)
		if err != nil {
			return err
		}
		if len(at) == 0 {
			return nil
		}
		err = unix.Unmount(target, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(target, unix.MNT_DETACH)
		}
		if err != nil {
			return fmt.Errorf("unmounting %s: %w", target, err)
		}
	}
}

// Keep binds o.Source onto o.Target (Bind), checks every o.Interval that
// it is still there (binding again when not, logging through logf), and
// when ctx ends unmounts o.Target (Unmount) and returns nil. An error of
// the first Bind, or of the final Unmount, is returned; a failed re-bind
// is logged and tried again at the next check.
func Keep(ctx context.Context, o Options, logf func(format string, args ...any)) error {
	if err := o.Validate(); err != nil {
		return err
	}
	mounted, err := Bind(o.Source, o.Target)
	if err != nil {
		return err
	}
	if mounted {
		logf("bind-mounted %s on %s", o.Source, o.Target)
	} else {
		logf("%s already shows %s; keeping it", o.Target, o.Source)
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := Unmount(o.Target); err != nil {
				return err
			}
			logf("unmounted %s", o.Target)
			return nil
		case <-tick.C:
			if mounted, err := Bind(o.Source, o.Target); err != nil {
				logf("checking %s: %v", o.Target, err)
			} else if mounted {
				logf("%s no longer showed %s: bind-mounted it again", o.Target, o.Source)
			}
		}
	}
}
