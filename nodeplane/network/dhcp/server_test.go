package dhcp_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/go-logr/logr"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"

	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/network/dhcp"
)

// link is the test's wire: a veth whose server end (k6t-eth0, the
// in-namespace bridge's stand-in, 10.0.2.1/24) is in one namespace and
// whose client end (eth0, the guest's NIC with guestMAC) is in another.
type link struct {
	server, client ns.NetNS
}

func newLink(t *testing.T) link {
	t.Helper()
	vmtest.Require(t, os.Geteuid() == 0, "DHCP server tests run as root (network namespaces, veths)")
	var l link
	var err error
	if l.server, err = testutils.NewNS(); err != nil {
		t.Fatal(err)
	}
	if l.client, err = testutils.NewNS(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []ns.NetNS{l.server, l.client} {
			_ = n.Close()
			_ = testutils.UnmountNS(n)
		}
	})
	err = l.server.Do(func(ns.NetNS) error {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = "k6t-eth0"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "eth0", PeerHardwareAddr: guestMAC, PeerNamespace: netlink.NsFd(int(l.client.Fd()))}); err != nil {
			return err
		}
		srv, err := netlink.LinkByName("k6t-eth0")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(srv, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("10.0.2.1"), Mask: net.CIDRMask(24, 32)}}); err != nil {
			return err
		}
		return netlink.LinkSetUp(srv)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = l.client.Do(func(ns.NetNS) error {
		c, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if lo, err := netlink.LinkByName("lo"); err == nil {
			_ = netlink.LinkSetUp(lo)
		}
		return netlink.LinkSetUp(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// serve starts a server for l on k6t-eth0, closed in t.Cleanup.
func (k link) serve(t *testing.T, l dhcp.Lease) *dhcp.Server {
	t.Helper()
	s, err := dhcp.Serve(k.server.Path(), "k6t-eth0", l, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// exchange runs a DHCP exchange with nclient4 from eth0 in the client
// namespace, as mac, with tries tries of a second each (a hang guard).
func (k link) exchange(mac net.HardwareAddr, tries int) (*nclient4.Lease, error) {
	var lease *nclient4.Lease
	err := k.client.Do(func(ns.NetNS) error {
		c, err := nclient4.New("eth0", nclient4.WithHWAddr(mac), nclient4.WithTimeout(time.Second), nclient4.WithRetry(tries))
		if err != nil {
			return err
		}
		defer c.Close()
		lease, err = c.Request(context.Background())
		return err
	})
	return lease, err
}

// TestServeAnswersItsClientOnly runs the server in one namespace and
// insomniacslk's nclient4 in another: the NIC's MAC gets the OFFER and
// the ACK of the lease; another MAC on the same wire gets nothing; after
// Close the server is stopped and a new one can take the port.
func TestServeAnswersItsClientOnly(t *testing.T) {
	k := newLink(t)
	l := masqueradeLease()
	s := k.serve(t, l)
	got, err := k.exchange(guestMAC, 3)
	if err != nil {
		t.Fatalf("DHCP exchange as %s: %v", guestMAC, err)
	}
	if got.Offer.MessageType() != dhcpv4.MessageTypeOffer || got.ACK.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("exchange: %s then %s", got.Offer.MessageType(), got.ACK.MessageType())
	}
	checkLease(t, got.Offer, l)
	checkLease(t, got.ACK, l)

	if got, err := k.exchange(otherMAC, 1); err == nil {
		t.Errorf("a client with MAC %s got %s: the server answers %s only", otherMAC, got.ACK.Summary(), guestMAC)
	}

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s.Running() || s.Err() != nil {
		t.Errorf("after Close: running %v, err %v", s.Running(), s.Err())
	}
	if _, err := k.exchange(guestMAC, 1); err == nil {
		t.Error("a closed server still answers")
	}
	l.Address = netip.MustParsePrefix("10.0.2.3/24")
	k.serve(t, l)
	if got, err := k.exchange(guestMAC, 3); err != nil || !got.ACK.YourIPAddr.Equal(net.ParseIP("10.0.2.3")) {
		t.Errorf("a new server on the same interface: %v, %v", got, err)
	}
}

// TestServeLeaseAppliedByUdhcpc has busybox's udhcpc, the DHCP client of
// the test guest, take the lease in the client namespace as a guest
// would: its script sees every option, and the address it applies is on
// eth0.
func TestServeLeaseAppliedByUdhcpc(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	vmtest.Require(t, err == nil, "busybox not found: apt-get install -y --no-install-recommends busybox-static")
	k := newLink(t)
	l := masqueradeLease()
	l.Routes = []dhcp.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.0.2.1")}}
	l.NTPServers = []netip.Addr{netip.MustParseAddr("10.0.2.1")}
	k.serve(t, l)

	dir := t.TempDir()
	env, script := filepath.Join(dir, "env"), filepath.Join(dir, "script")
	// the script records the lease and applies the address as a guest's
	// default.script does
	if err := os.WriteFile(script, []byte("#!/bin/sh\nenv > "+env+".$1\n[ \"$1\" = bound ] && ip addr add $ip/$mask dev $interface\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net="+k.client.Path(), busybox, "udhcpc", "-f", "-q", "-n", "-t", "5", "-T", "1", "-i", "eth0", "-s", script,
		"-O", "search", "-O", "staticroutes", "-O", "mtu", "-O", "ntpsrv", "-O", "hostname", "-O", "domain")
	cmd.Env = []string{"PATH=" + filepath.Dir(busybox) + ":/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(env + ".bound")
	if err != nil {
		t.Fatalf("udhcpc did not bind: %v", err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	for k, want := range map[string]string{
		"ip": "10.0.2.2", "mask": "24", "router": "10.0.2.1", "serverid": "10.0.2.1", "dns": "10.96.0.10",
		"search": "ns.svc.cluster.local svc.cluster.local", "domain": "ns.svc.cluster.local", "hostname": "vm1",
		"mtu": "1450", "staticroutes": "0.0.0.0/0 10.0.2.1", "ntpsrv": "10.0.2.1", "lease": "86313600",
	} {
		if got := strings.TrimSpace(vars[k]); got != want {
			t.Errorf("udhcpc's %s=%q, want %q", k, got, want)
		}
	}
	err = k.client.Do(func(ns.NetNS) error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		as, err := netlink.AddrList(eth0, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.IPNet.String() == "10.0.2.2/24" {
				return nil
			}
		}
		t.Errorf("eth0 addresses after udhcpc: %v, want 10.0.2.2/24", as)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
