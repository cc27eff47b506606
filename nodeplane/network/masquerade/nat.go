package masquerade

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Names of the table and chains, as KubeVirt's.
const (
	TableName        = "nat"
	PreroutingChain  = "prerouting"
	InputChain       = "input"
	OutputChain      = "output"
	PostroutingChain = "postrouting"
	PreInboundChain  = "KUBEVIRT_PREINBOUND"
	PostInboundChain = "KUBEVIRT_POSTINBOUND"
)

// Port is a forwarded port or port range: Protocol "tcp" or "udp", First
// to Last inclusive (equal for one port).
type Port struct {
	Protocol    string
	First, Last uint16
}

func (p Port) String() string {
	if p.First == p.Last {
		return fmt.Sprintf("%s/%d", p.Protocol, p.First)
	}
	return fmt.Sprintf("%s/%d-%d", p.Protocol, p.First, p.Last)
}

// NAT is the rules of one masquerade interface.
type NAT struct {
	// PodIf is the pod interface (eth0), where the pod IP is.
	PodIf string
	// Bridge is the in-namespace bridge the guest is behind (k6t-eth0).
	Bridge string
	// Network gives the gateway and guest addresses.
	Network Network
	// Ports are forwarded to the guest; none forwards every port.
	Ports []Port
}

// Validate checks the interface names, addresses and ports.
func (n NAT) Validate() error {
	var errs []error
	for _, name := range []string{n.PodIf, n.Bridge} {
		if name == "" || len(name) > unix.IFNAMSIZ-1 {
			errs = append(errs, fmt.Errorf("interface name %q: expected 1 to 15 bytes", name))
		}
	}
	if !n.Network.Gateway.Addr().Is4() || !n.Network.Guest.Is4() {
		errs = append(errs, fmt.Errorf("VM network gateway %s, guest %s: expected IPv4", n.Network.Gateway, n.Network.Guest))
	}
	for _, p := range n.Ports {
		if (p.Protocol != "tcp" && p.Protocol != "udp") || p.First == 0 || p.Last < p.First {
			errs = append(errs, fmt.Errorf("port %s: expected tcp or udp and 1 <= first <= last <= 65535", p))
		}
	}
	return errors.Join(errs...)
}

// Apply programs n's rules in the network namespace at netnsPath (empty:
// the caller's), replacing the table ip nat in one transaction, so it is
// idempotent and a namespace never holds half the rules. The rules are
// KubeVirt's setupNATByFamily (IPv4, without Istio and without the legacy
// migration ports):
//
//	postrouting:          ip saddr GUEST counter masquerade
//	prerouting:           iifname POD counter jump KUBEVIRT_PREINBOUND
//	postrouting:          oifname BRIDGE counter jump KUBEVIRT_POSTINBOUND
//	per port P (or once without a port when none):
//	  KUBEVIRT_PREINBOUND:  PROTO dport P counter dnat to GUEST
//	  KUBEVIRT_POSTINBOUND: PROTO dport P ip saddr 127.0.0.1 counter snat to GATEWAY
//	  output:               ip daddr 127.0.0.1 PROTO dport P counter dnat to GUEST
func (n NAT) Apply(netnsPath string) error {
	if err := n.Validate(); err != nil {
		return fmt.Errorf("masquerade NAT: %w", err)
	}
	err := withConn(netnsPath, func(c *nftables.Conn) error {
		t := &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
		c.AddTable(t) // so that the delete never fails
		c.DelTable(t)
		c.AddTable(t)
		chain := func(name string, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
			ch := &nftables.Chain{Name: name, Table: t}
			if hook != nil {
				ch.Type, ch.Hooknum, ch.Priority = nftables.ChainTypeNAT, hook, prio
			}
			return c.AddChain(ch)
		}
		pre := chain(PreroutingChain, nftables.ChainHookPrerouting, nftables.ChainPriorityRef(-100))
		chain(InputChain, nftables.ChainHookInput, nftables.ChainPriorityRef(100))
		out := chain(OutputChain, nftables.ChainHookOutput, nftables.ChainPriorityRef(-100))
		post := chain(PostroutingChain, nftables.ChainHookPostrouting, nftables.ChainPriorityRef(100))
		preIn := chain(PreInboundChain, nil, nil)
		postIn := chain(PostInboundChain, nil, nil)
		add := func(ch *nftables.Chain, exprs ...expr.Any) {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs})
		}
		guest, gw := n.Network.Guest.AsSlice(), n.Network.Gateway.Addr().AsSlice()
		loopback := netip.MustParseAddr("127.0.0.1").AsSlice()

		add(post, cat(ipAddr(srcOffset, guest), counter(), &expr.Masq{})...)
		add(pre, cat(ifName(expr.MetaKeyIIFNAME, n.PodIf), counter(), jump(PreInboundChain))...)
		add(post, cat(ifName(expr.MetaKeyOIFNAME, n.Bridge), counter(), jump(PostInboundChain))...)
		ports := n.Ports
		if len(ports) == 0 {
			ports = []Port{{}} // every port
		}
		for _, p := range ports {
			add(preIn, cat(port(p), counter(), nat(expr.NATTypeDestNAT, guest))...)
			add(postIn, cat(port(p), ipAddr(srcOffset, loopback), counter(), nat(expr.NATTypeSourceNAT, gw))...)
			add(out, cat(ipAddr(dstOffset, loopback), port(p), counter(), nat(expr.NATTypeDestNAT, guest))...)
		}
		return c.Flush()
	})
	if err != nil {
		return fmt.Errorf("masquerade NAT in %s: %w", netnsPath, err)
	}
	return nil
}

// DeleteNAT removes the table ip nat from the namespace at netnsPath; a
// missing table is not an error.
func DeleteNAT(netnsPath string) error {
	return withConn(netnsPath, func(c *nftables.Conn) error {
		t := &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
		c.AddTable(t)
		c.DelTable(t)
		return c.Flush()
	})
}

// withConn runs f with an nftables connection to the namespace at path.
func withConn(path string, f func(*nftables.Conn) error) error {
	var opts []nftables.ConnOption
	if path != "" {
		ns, err := os.Open(path)
		if err != nil {
			return err
		}
		defer ns.Close()
		opts = append(opts, nftables.WithNetNSFd(int(ns.Fd())))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return err
	}
	return f(c)
}

const (
	srcOffset = 12 // IPv4 header: source address
	dstOffset = 16 // destination address
)

func cat(parts ...any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		switch v := p.(type) {
		case []expr.Any:
			out = append(out, v...)
		case expr.Any:
			out = append(out, v)
		}
	}
	return out
}

func counter() expr.Any { return &expr.Counter{} }

func jump(chain string) expr.Any { return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain} }

// ipAddr matches the IPv4 source or destination address.
func ipAddr(offset uint32, addr []byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr},
	}
}

// ifName matches the input or output interface name.
func ifName(key expr.MetaKey, name string) []expr.Any {
	data := make([]byte, unix.IFNAMSIZ)
	copy(data, name)
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data},
	}
}

// port matches p's protocol and destination port or range; the zero
// Port matches everything.
func port(p Port) []expr.Any {
	if p.Protocol == "" {
		return nil
	}
	proto := byte(unix.IPPROTO_TCP)
	if p.Protocol == "udp" {
		proto = unix.IPPROTO_UDP
	}
	out := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
	if p.First == p.Last {
		return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(p.First)})
	}
	return append(out, &expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: binaryutil.BigEndian.PutUint16(p.First), ToData: binaryutil.BigEndian.PutUint16(p.Last)})
}

// nat translates to addr (DNAT or SNAT).
func nat(t expr.NATType, addr []byte) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: addr},
		&expr.NAT{Type: t, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
	}
}
