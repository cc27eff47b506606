package netattach

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netns"
)

// NetnsDir is where named network namespaces are bind-mounted, as
// `ip netns` does.
const NetnsDir = "/run/netns"

// NetnsPath gives the path of the named network namespace name.
func NetnsPath(name string) string { return filepath.Join(NetnsDir, name) }

// EnsureNetns creates the named network namespace name (bind-mounted at
// NetnsPath(name), visible to `ip netns`) unless it exists already, and
// gives its path. The calling goroutine's namespace is not changed.
func EnsureNetns(name string) (string, error) {
	p := NetnsPath(name)
	if err := ns.IsNSorErr(p); err == nil {
		return p, nil
	}
	if _, err := os.Stat(p); err == nil {
		// a file left by a crash between create and bind mount
		if err := os.Remove(p); err != nil {
			return "", fmt.Errorf("network namespace %s: removing a stale %s: %w", name, p, err)
		}
	}
	errc := make(chan error, 1)
	go func() {
		// a fresh thread: unshare moves it into the new namespace, and it
		// is only given back to the runtime once it is home again
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		}
		if serr := netns.Set(orig); serr != nil {
			errc <- errors.Join(err, serr) // thread stays locked and dies with the goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	if err := <-errc; err != nil {
		return "", fmt.Errorf("network namespace %s: creating %s: %w", name, p, err)
	}
	return p, nil
}

// DeleteNetns unmounts and removes the named network namespace name; a
// namespace that does not exist is not an error. The kernel frees the
// namespace, and the interfaces still in it, once no process holds it.
func DeleteNetns(name string) error {
	p := NetnsPath(name)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		// not mounted (a stale file): remove what is there
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return fmt.Errorf("network namespace %s: deleting %s: %w", name, p, errors.Join(err, rerr))
		}
	}
	return nil
}

// inNetns runs f with the calling goroutine's thread in the namespace at
// path (the current one when path is empty). Child processes f starts
// (CNI plugins) inherit that namespace.
func inNetns(path string, f func() error) error {
	if path == "" {
		return f()
	}
	return ns.WithNetNSPath(path, func(ns.NetNS) error { return f() })
}
