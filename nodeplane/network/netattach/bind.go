package netattach

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Binding joins a VM's tap with a CNI interface inside the VMI's network
// namespace, as KubeVirt's bridge binding does in virt-launcher's pod:
// the pod interface keeps no IP and gets a random locally administered
// MAC (so the in-namespace bridge forwards the VM's MAC to the tap instead
// of taking it for itself), and the tap and the pod interface become the
// two ports of the bridge.
type Binding struct {
	// Netns is the path of the VMI's network namespace.
	Netns string
	// HostNetns is the path of the namespace the tap is created in
	// (libvirt's); empty means the caller's.
	HostNetns string
	// PodIf is the CNI interface in Netns (net1, …).
	PodIf string
	// Tap is the VM's tap, in HostNetns until bound.
	Tap string
	// Bridge is the in-namespace bridge (k6t-net1, …).
	Bridge string
	// MTU is set on the tap and the bridge; 0 leaves the kernel's.
	MTU int
}

// BridgeName gives the in-namespace bridge for a pod interface:
// "k6t-<podIf>", virt-launcher's name.
func BridgeName(podIf string) string { return "k6t-" + podIf }

// Bind makes b's plumbing: it moves the tap from HostNetns into Netns
// unless it is there already, strips the pod interface, creates the bridge
// and joins both, all up. It is idempotent: a bound Binding is left as is.
func Bind(b Binding) error {
	id := fmt.Sprintf("binding of tap %s to %s in %s", b.Tap, b.PodIf, b.Netns)
	target, err := ns.GetNS(b.Netns)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	defer target.Close()
	if err := moveTap(b.Tap, b.HostNetns, target); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	if err := target.Do(func(ns.NetNS) error { return b.plumb() }); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}

// plumb runs inside the VMI's namespace.
func (b Binding) plumb() error {
	pod, err := netlink.LinkByName(b.PodIf)
	if err != nil {
		return fmt.Errorf("pod interface: %w", err)
	}
	tap, err := netlink.LinkByName(b.Tap)
	if err != nil {
		return fmt.Errorf("tap: %w", err)
	}
	br, err := netlink.LinkByName(b.Bridge)
	if err != nil {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU = b.Bridge, b.MTU
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
			return fmt.Errorf("creating bridge %s: %w", b.Bridge, err)
		}
		if br, err = netlink.LinkByName(b.Bridge); err != nil {
			return fmt.Errorf("bridge %s: %w", b.Bridge, err)
		}
	}
	if pod.Attrs().MasterIndex != br.Attrs().Index {
		if err := netlink.LinkSetDown(pod); err != nil {
			return fmt.Errorf("pod interface down: %w", err)
		}
		if err := netlink.LinkSetHardwareAddr(pod, randomMAC()); err != nil {
			return fmt.Errorf("pod interface MAC: %w", err)
		}
		addrs, err := netlink.AddrList(pod, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("pod interface addresses: %w", err)
		}
		for _, a := range addrs {
			if err := netlink.AddrDel(pod, &a); err != nil {
				return fmt.Errorf("pod interface: removing %s: %w", a.IPNet, err)
			}
		}
		if err := netlink.LinkSetMaster(pod, br); err != nil {
			return fmt.Errorf("pod interface into %s: %w", b.Bridge, err)
		}
	}
	if b.MTU > 0 && tap.Attrs().MTU != b.MTU {
		if err := netlink.LinkSetMTU(tap, b.MTU); err != nil {
			return fmt.Errorf("tap MTU %d: %w", b.MTU, err)
		}
	}
	if tap.Attrs().MasterIndex != br.Attrs().Index {
		if err := netlink.LinkSetMaster(tap, br); err != nil {
			return fmt.Errorf("tap into %s: %w", b.Bridge, err)
		}
	}
	for _, l := range []netlink.Link{pod, tap, br} {
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("%s up: %w", l.Attrs().Name, err)
		}
	}
	return nil
}

// ErrNotBound is wrapped by Verify when the binding is not (or no longer)
// in place.
var ErrNotBound = errors.New("not bound")

// Verify checks that b is in place: the pod interface and the tap are up
// ports of the bridge in Netns. A missing piece wraps ErrNotBound.
func Verify(b Binding) error {
	err := ns.WithNetNSPath(b.Netns, func(ns.NetNS) error {
		br, err := netlink.LinkByName(b.Bridge)
		if err != nil {
			return fmt.Errorf("%w: bridge %s: %v", ErrNotBound, b.Bridge, err)
		}
		for _, name := range []string{b.PodIf, b.Tap} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrNotBound, name, err)
			}
			if l.Attrs().MasterIndex != br.Attrs().Index {
				return fmt.Errorf("%w: %s is not a port of %s", ErrNotBound, name, b.Bridge)
			}
			if l.Attrs().Flags&net.FlagUp == 0 {
				return fmt.Errorf("%w: %s is down", ErrNotBound, name)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("binding of tap %s to %s in %s: %w", b.Tap, b.PodIf, b.Netns, err)
	}
	return nil
}

// moveTap moves the tap from the namespace at hostNetns (empty: the
// caller's) into target, unless it is there already.
func moveTap(tap, hostNetns string, target ns.NetNS) error {
	inTarget := false
	if err := target.Do(func(ns.NetNS) error {
		_, err := netlink.LinkByName(tap)
		inTarget = err == nil
		return nil
	}); err != nil {
		return err
	}
	if inTarget {
		return nil
	}
	err := inNetns(hostNetns, func() error {
		l, err := netlink.LinkByName(tap)
		if err != nil {
			return fmt.Errorf("tap not found in the host namespace nor in the VMI's: %w", err)
		}
		return netlink.LinkSetNsFd(l, int(target.Fd()))
	})
	if err != nil {
		return fmt.Errorf("moving the tap: %w", err)
	}
	return nil
}

// randomMAC gives a random unicast, locally administered MAC.
func randomMAC() net.HardwareAddr {
	m := make(net.HardwareAddr, 6)
	_, _ = rand.Read(m)
	m[0] = m[0]&0xfe | 0x02
	return m
}
