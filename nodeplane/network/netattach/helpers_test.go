package netattach_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/network/netattach"
)

// requireRoot skips (fails under CONVERGE_REQUIRE_NODEPLANE=1) unless the
// test runs as root: it creates network namespaces, veths and taps.
func requireRoot(t *testing.T) {
	t.Helper()
	vmtest.Require(t, os.Geteuid() == 0, "netattach tests run as root (network namespaces, veths, taps)")
}

// pluginDir gives <repo>/bin/cni, where `make cni` builds bridge,
// host-local and loopback.
func pluginDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(vmtest.RepoRoot(t), "bin", "cni")
	for _, p := range []string{"bridge", "host-local"} {
		_, err := os.Stat(filepath.Join(dir, p))
		vmtest.Require(t, err == nil, "CNI plugin %s missing in %s: run make cni", p, dir)
	}
	return dir
}

// requireTool skips (or fails in CI) without the binary.
func requireTool(t *testing.T, bin, pkg string) {
	t.Helper()
	_, err := exec.LookPath(bin)
	vmtest.Require(t, err == nil, "%s not found: apt-get install -y --no-install-recommends %s", bin, pkg)
}

// newNetns creates a named netns for the test, deleted in t.Cleanup.
func newNetns(t *testing.T, name string) string {
	t.Helper()
	_ = netattach.DeleteNetns(name) // a leftover of a killed run
	p, err := netattach.EnsureNetns(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netattach.DeleteNetns(name); err != nil {
			t.Error(err)
		}
	})
	return p
}

// in runs f inside the namespace at path, failing the test on error.
func in(t *testing.T, path string, f func() error) {
	t.Helper()
	if err := ns.WithNetNSPath(path, func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

// run runs a command inside the namespace at path and gives its output.
func run(path string, argv ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"--net=" + path}, argv...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s in %s: %w: %s", strings.Join(argv, " "), path, err, out)
	}
	return string(out), nil
}

// openTap creates the tap name in the namespace at path the way QEMU's
// helper does (TUNSETIFF on /dev/net/tun, IFF_TAP|IFF_NO_PI) and gives the
// queue's file; the tap lives as long as the file is open.
func openTap(t *testing.T, path, name string) *os.File {
	t.Helper()
	var f *os.File
	in(t, path, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		var req [unix.IFNAMSIZ + 64]byte
		copy(req[:unix.IFNAMSIZ-1], name)
		*(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ])) = unix.IFF_TAP | unix.IFF_NO_PI
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", name, e)
		}
		if err := unix.SetNonblock(fd, true); err != nil { // pollable: read deadlines work
			unix.Close(fd)
			return err
		}
		f = os.NewFile(uintptr(fd), "tap-"+name)
		return nil
	})
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// vethPair makes a veth a<->b in the namespace at path, b moved into
// peerNS with mac and addr (CIDR) and up; a stays down in path.
func vethPair(t *testing.T, path, a, b, peerNS, mac, addr string) {
	t.Helper()
	peer, err := ns.GetNS(peerNS)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	in(t, path, func() error {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = a
		hw, _ := net.ParseMAC(mac)
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: b, PeerHardwareAddr: hw, PeerNamespace: netlink.NsFd(int(peer.Fd()))})
	})
	in(t, peerNS, func() error {
		l, err := netlink.LinkByName(b)
		if err != nil {
			return err
		}
		ip, err := netlink.ParseAddr(addr)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, ip); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
}
