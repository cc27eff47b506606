package masquerade_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"

	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/network/masquerade"
)

func TestNetworkOf(t *testing.T) {
	for _, tc := range []struct {
		cidr, gw, guest, err string
	}{
		{"", "10.0.2.1/24", "10.0.2.2", ""},
		{"10.0.2.0/24", "10.0.2.1/24", "10.0.2.2", ""},
		{"192.168.77.0/28", "192.168.77.1/28", "192.168.77.2", ""},
		{"172.16.3.9/30", "172.16.3.9/30", "172.16.3.10", ""},
		{"10.0.0.0/31", "", "", "too small"},
		{"fd10:0:2::/120", "", "", "expected an IPv4 CIDR (the masquerade binding is IPv4 only)"},
		{"10.0.2.0", "", "", "expected an IPv4 CIDR such as 10.0.2.0/24"},
	} {
		n, err := masquerade.NetworkOf(tc.cidr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.cidr, err, tc.err)
			}
			continue
		}
		if err != nil || n.Gateway.String() != tc.gw || n.Guest.String() != tc.guest {
			t.Errorf("%q: %v %v, want %s %s", tc.cidr, n, err, tc.gw, tc.guest)
		}
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	vmtest.Require(t, os.Geteuid() == 0, "masquerade tests run as root (network namespaces, veths, nftables)")
}

func newNS(t *testing.T) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.Close()
		_ = testutils.UnmountNS(n)
	})
	return n
}

// describe renders a rule read back from the kernel in nft's words.
func describe(r *nftables.Rule) string {
	var out []string
	var pending string // what the last payload/meta loaded
	for _, e := range r.Exprs {
		switch v := e.(type) {
		case *expr.Meta:
			pending = map[expr.MetaKey]string{expr.MetaKeyIIFNAME: "iifname", expr.MetaKeyOIFNAME: "oifname", expr.MetaKeyL4PROTO: "l4proto"}[v.Key]
		case *expr.Payload:
			switch {
			case v.Base == expr.PayloadBaseNetworkHeader && v.Offset == 12:
				pending = "ip saddr"
			case v.Base == expr.PayloadBaseNetworkHeader && v.Offset == 16:
				pending = "ip daddr"
			case v.Base == expr.PayloadBaseTransportHeader && v.Offset == 2:
				pending = "dport"
			default:
				pending = fmt.Sprintf("payload(%d,%d)", v.Base, v.Offset)
			}
		case *expr.Cmp:
			var val string
			switch pending {
			case "iifname", "oifname":
				val = strings.TrimRight(string(v.Data), "\x00")
			case "l4proto":
				val = map[byte]string{6: "tcp", 17: "udp"}[v.Data[0]]
			case "dport":
				val = fmt.Sprint(int(v.Data[0])<<8 | int(v.Data[1]))
			default:
				a, _ := netip.AddrFromSlice(v.Data)
				val = a.String()
			}
			if pending == "l4proto" {
				out = append(out, val)
			} else {
				out = append(out, pending+" "+val)
			}
		case *expr.Range:
			out = append(out, fmt.Sprintf("%s %d-%d", pending, int(v.FromData[0])<<8|int(v.FromData[1]), int(v.ToData[0])<<8|int(v.ToData[1])))
		case *expr.Counter:
			out = append(out, "counter")
		case *expr.Masq:
			out = append(out, "masquerade")
		case *expr.Verdict:
			out = append(out, "jump "+v.Chain)
		case *expr.Immediate:
			a, _ := netip.AddrFromSlice(v.Data)
			pending = a.String()
		case *expr.NAT:
			out = append(out, map[expr.NATType]string{expr.NATTypeDestNAT: "dnat", expr.NATTypeSourceNAT: "snat"}[v.Type]+" to "+pending)
		default:
			out = append(out, fmt.Sprintf("%T", e))
		}
	}
	return strings.Join(out, " ")
}

func readRules(t *testing.T, path string) map[string][]string {
	t.Helper()
	rules, err := masquerade.Rules(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for chain, rs := range rules {
		out[chain] = []string{}
		for _, r := range rs {
			out[chain] = append(out[chain], describe(r))
		}
	}
	return out
}

// TestNATRulesReadBack applies the rules of an interface with ports and
// reads them back from the kernel with the library: KubeVirt's chains
// and rules, per port (a range as a range); applying again replaces them
// (no duplicates); without ports every port is forwarded; DeleteNAT
// leaves no table.
func TestNATRulesReadBack(t *testing.T) {
	requireRoot(t)
	n := newNS(t)
	network, _ := masquerade.NetworkOf("")
	nat := masquerade.NAT{PodIf: "eth0", Bridge: "k6t-eth0", Network: network, Ports: []masquerade.Port{
		{Protocol: "tcp", First: 80, Last: 80}, {Protocol: "udp", First: 53, Last: 53}, {Protocol: "tcp", First: 8000, Last: 8010}}}
	want := map[string][]string{
		"prerouting":  {"iifname eth0 counter jump KUBEVIRT_PREINBOUND"},
		"input":       {},
		"postrouting": {"ip saddr 10.0.2.2 counter masquerade", "oifname k6t-eth0 counter jump KUBEVIRT_POSTINBOUND"},
		"KUBEVIRT_PREINBOUND": {
			"tcp dport 80 counter dnat to 10.0.2.2", "udp dport 53 counter dnat to 10.0.2.2", "tcp dport 8000-8010 counter dnat to 10.0.2.2"},
		"KUBEVIRT_POSTINBOUND": {
			"tcp dport 80 ip saddr 127.0.0.1 counter snat to 10.0.2.1", "udp dport 53 ip saddr 127.0.0.1 counter snat to 10.0.2.1",
			"tcp dport 8000-8010 ip saddr 127.0.0.1 counter snat to 10.0.2.1"},
		"output": {
			"ip daddr 127.0.0.1 tcp dport 80 counter dnat to 10.0.2.2", "ip daddr 127.0.0.1 udp dport 53 counter dnat to 10.0.2.2",
			"ip daddr 127.0.0.1 tcp dport 8000-8010 counter dnat to 10.0.2.2"},
	}
	for round := 1; round <= 2; round++ {
		if err := nat.Apply(n.Path()); err != nil {
			t.Fatal(err)
		}
		if got := readRules(t, n.Path()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("apply #%d: rules\n%v\nwant\n%v", round, got, want)
		}
	}
	nat.Ports = nil
	if err := nat.Apply(n.Path()); err != nil {
		t.Fatal(err)
	}
	got := readRules(t, n.Path())
	for chain, rules := range map[string][]string{
		"KUBEVIRT_PREINBOUND":  {"counter dnat to 10.0.2.2"},
		"KUBEVIRT_POSTINBOUND": {"ip saddr 127.0.0.1 counter snat to 10.0.2.1"},
		"output":               {"ip daddr 127.0.0.1 counter dnat to 10.0.2.2"},
	} {
		if fmt.Sprint(got[chain]) != fmt.Sprint(rules) {
			t.Errorf("without ports, %s: %q, want %q", chain, got[chain], rules)
		}
	}
	if err := masquerade.DeleteNAT(n.Path()); err != nil {
		t.Fatal(err)
	}
	if chains, err := masquerade.Chains(n.Path()); err != nil || len(chains) != 0 {
		t.Errorf("after DeleteNAT: chains %q, %v", chains, err)
	}
	if err := masquerade.DeleteNAT(n.Path()); err != nil {
		t.Errorf("DeleteNAT without a table: %v", err)
	}
	bad := nat
	bad.Ports = []masquerade.Port{{Protocol: "sctp", First: 9, Last: 9}}
	if err := bad.Apply(n.Path()); err == nil || !strings.Contains(err.Error(), "port sctp/9: expected tcp or udp") {
		t.Errorf("sctp port: %v", err)
	}
}

// topology is a host, the VMI's namespace (pod) and a guest stand-in:
// host vethh 10.244.0.1/24 <-> pod eth0 10.244.0.5/24 (default route via
// the host), pod cvt-tap0 (the VM's tap stand-in) <-> guest eth0
// 10.0.2.2/24 (default route via 10.0.2.1), as a guest configured by
// DHCP would have it.
type topology struct{ host, pod, guest ns.NetNS }

func newTopology(t *testing.T) topology {
	t.Helper()
	tp := topology{host: newNS(t), pod: newNS(t), guest: newNS(t)}
	veth := func(in ns.NetNS, name, peer string, peerNS ns.NetNS) {
		err := in.Do(func(ns.NetNS) error {
			attrs := netlink.NewLinkAttrs()
			attrs.Name = name
			return netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: peer, PeerNamespace: netlink.NsFd(int(peerNS.Fd()))})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	veth(tp.host, "vethh", "eth0", tp.pod)
	veth(tp.pod, "cvt-tap0", "eth0", tp.guest)
	conf := func(n ns.NetNS, ifname, cidr, gw string) {
		err := n.Do(func(ns.NetNS) error {
			for _, name := range []string{"lo", ifname} {
				l, err := netlink.LinkByName(name)
				if err != nil {
					return err
				}
				if err := netlink.LinkSetUp(l); err != nil {
					return err
				}
			}
			if cidr == "" {
				return nil
			}
			l, _ := netlink.LinkByName(ifname)
			a, err := netlink.ParseAddr(cidr)
			if err != nil {
				return err
			}
			if err := netlink.AddrAdd(l, a); err != nil {
				return err
			}
			if gw == "" {
				return nil
			}
			return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(gw)})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	conf(tp.host, "vethh", "10.244.0.1/24", "")
	conf(tp.pod, "eth0", "10.244.0.5/24", "10.244.0.1")
	conf(tp.guest, "eth0", "", "")
	return tp
}

// listen serves TCP on addr in n: each connection is answered with the
// address it came from, then closed.
func listen(t *testing.T, n ns.NetNS, addr string) {
	t.Helper()
	var l net.Listener
	err := n.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, c.RemoteAddr().String())
			_ = c.Close()
		}
	}()
}

// dial connects from n to addr and gives what the listener answered
// (the address it saw us from).
func dial(n ns.NetNS, addr string) (string, error) {
	var got string
	err := n.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		got = string(b)
		return err
	})
	return got, err
}

// TestMasqueradeForwards makes the binding between a pod interface and a
// guest stand-in and checks it carries traffic as KubeVirt's does:
//   - the host reaches a declared port of the guest through the pod IP
//     (DNAT), seen from the host's own address;
//   - a port not declared is not forwarded (refused by the namespace);
//   - the guest reaches the host, seen from the pod IP (masquerade);
//   - the namespace's loopback reaches the guest's declared port, seen
//     from the gateway (output DNAT, SNAT to the gateway);
//   - without ports, every port is forwarded;
//   - Verify passes once plumbed and names what is missing otherwise.
func TestMasqueradeForwards(t *testing.T) {
	requireRoot(t)
	tp := newTopology(t)
	network, _ := masquerade.NetworkOf("")
	b := masquerade.Binding{Netns: tp.pod.Path(), Tap: "cvt-tap0", MTU: 1400, NAT: masquerade.NAT{
		PodIf: "eth0", Bridge: masquerade.BridgeName("eth0"), Network: network, Ports: []masquerade.Port{{Protocol: "tcp", First: 8080, Last: 8080}}}}
	if err := masquerade.Verify(b); !errors.Is(err, masquerade.ErrNotPlumbed) {
		t.Fatalf("Verify before Plumb: %v, want ErrNotPlumbed", err)
	}
	for i := 0; i < 2; i++ { // idempotent
		if err := masquerade.Plumb(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := masquerade.Verify(b); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	err := tp.guest.Do(func(ns.NetNS) error {
		l, _ := netlink.LinkByName("eth0")
		a, _ := netlink.ParseAddr("10.0.2.2/24")
		if err := netlink.AddrAdd(l, a); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP("10.0.2.1")})
	})
	if err != nil {
		t.Fatal(err)
	}
	listen(t, tp.guest, "0.0.0.0:8080")
	listen(t, tp.guest, "0.0.0.0:9090")
	listen(t, tp.host, "10.244.0.1:7070")

	if got, err := dial(tp.host, "10.244.0.5:8080"); err != nil || !strings.HasPrefix(got, "10.244.0.1:") {
		t.Errorf("host -> pod IP:8080 (declared): %q, %v; want the guest's answer seeing 10.244.0.1", got, err)
	}
	if got, err := dial(tp.host, "10.244.0.5:9090"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("host -> pod IP:9090 (not declared): %q, %v; want connection refused", got, err)
	}
	if got, err := dial(tp.guest, "10.244.0.1:7070"); err != nil || !strings.HasPrefix(got, "10.244.0.5:") {
		t.Errorf("guest -> host: %q, %v; want the host's answer seeing the pod IP 10.244.0.5", got, err)
	}
	if got, err := dial(tp.pod, "127.0.0.1:8080"); err != nil || !strings.HasPrefix(got, "10.0.2.1:") {
		t.Errorf("pod loopback -> 127.0.0.1:8080: %q, %v; want the guest's answer seeing the gateway 10.0.2.1", got, err)
	}

	b.NAT.Ports = nil
	if err := masquerade.Plumb(b); err != nil {
		t.Fatal(err)
	}
	if got, err := dial(tp.host, "10.244.0.5:9090"); err != nil || !strings.HasPrefix(got, "10.244.0.1:") {
		t.Errorf("without ports, host -> pod IP:9090: %q, %v; want the guest's answer", got, err)
	}

	// a missing piece is named
	if err := masquerade.DeleteNAT(tp.pod.Path()); err != nil {
		t.Fatal(err)
	}
	if err := masquerade.Verify(b); !errors.Is(err, masquerade.ErrNotPlumbed) || !strings.Contains(err.Error(), "no chain") {
		t.Errorf("Verify without the NAT table: %v", err)
	}
}
