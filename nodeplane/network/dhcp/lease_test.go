package dhcp_test

import (
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/network/dhcp"
)

var (
	guestMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	otherMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x65, 0x43, 0x21}
)

// masqueradeLease is what the masquerade binding offers with the
// default VM network.
func masqueradeLease() dhcp.Lease {
	return dhcp.Lease{
		ClientMAC:  guestMAC,
		Address:    netip.MustParsePrefix("10.0.2.2/24"),
		ServerID:   netip.MustParseAddr("10.0.2.1"),
		Router:     netip.MustParseAddr("10.0.2.1"),
		DNS:        []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Search:     []string{"ns.svc.cluster.local", "svc.cluster.local"},
		DomainName: "ns.svc.cluster.local",
		Hostname:   "vm1",
		MTU:        1450,
	}
}

func request(t *testing.T, mac net.HardwareAddr, typ dhcpv4.MessageType, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(mac), dhcpv4.WithMessageType(typ)}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReply answers each kind of request: an OFFER and an ACK carry the
// lease (address, mask, router, DNS, search, domain, host name, MTU,
// server identifier, 999-day lease); a REQUEST for another address gets a
// NAK; another MAC, another server's REQUEST, a RELEASE and an INFORM get
// nothing.
func TestReply(t *testing.T) {
	l := masqueradeLease()
	for _, tc := range []struct {
		name string
		req  *dhcpv4.DHCPv4
		want dhcpv4.MessageType // MessageTypeNone: no reply
	}{
		{"discover", request(t, guestMAC, dhcpv4.MessageTypeDiscover), dhcpv4.MessageTypeOffer},
		{"request selecting", request(t, guestMAC, dhcpv4.MessageTypeRequest,
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.0.2.2"))), dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.0.2.1")))), dhcpv4.MessageTypeAck},
		{"request renewing", request(t, guestMAC, dhcpv4.MessageTypeRequest, dhcpv4.WithClientIP(net.ParseIP("10.0.2.2"))), dhcpv4.MessageTypeAck},
		{"request for an old address", request(t, guestMAC, dhcpv4.MessageTypeRequest,
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.0.2.7")))), dhcpv4.MessageTypeNak},
		{"request to another server", request(t, guestMAC, dhcpv4.MessageTypeRequest,
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.0.2.254")))), dhcpv4.MessageTypeNone},
		{"another MAC", request(t, otherMAC, dhcpv4.MessageTypeDiscover), dhcpv4.MessageTypeNone},
		{"release", request(t, guestMAC, dhcpv4.MessageTypeRelease), dhcpv4.MessageTypeNone},
		{"inform", request(t, guestMAC, dhcpv4.MessageTypeInform), dhcpv4.MessageTypeNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := dhcp.Reply(tc.req, l)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == dhcpv4.MessageTypeNone {
				if resp != nil {
					t.Fatalf("reply %s, want none", resp.Summary())
				}
				return
			}
			if resp == nil || resp.MessageType() != tc.want {
				t.Fatalf("reply %v, want %s", resp, tc.want)
			}
			if resp.TransactionID != tc.req.TransactionID || !reflect.DeepEqual(resp.ClientHWAddr, guestMAC) {
				t.Errorf("reply xid %s mac %s, want the request's %s %s", resp.TransactionID, resp.ClientHWAddr, tc.req.TransactionID, guestMAC)
			}
			if tc.want == dhcpv4.MessageTypeNak {
				if !resp.YourIPAddr.IsUnspecified() {
					t.Errorf("NAK yiaddr %s, want none", resp.YourIPAddr)
				}
				return
			}
			checkLease(t, resp, l)
		})
	}
}

// checkLease checks every option of l in resp.
func checkLease(t *testing.T, resp *dhcpv4.DHCPv4, l dhcp.Lease) {
	t.Helper()
	got := map[string]string{
		"yiaddr":    resp.YourIPAddr.String(),
		"mask":      net.IP(resp.SubnetMask()).String(),
		"server":    resp.ServerIdentifier().String(),
		"router":    ipsString(resp.Router()),
		"dns":       ipsString(resp.DNS()),
		"domain":    resp.DomainName(),
		"hostname":  resp.HostName(),
		"lease":     resp.IPAddressLeaseTime(0).String(),
		"mtu":       string(resp.Options.Get(dhcpv4.OptionInterfaceMTU)),
		"search":    "",
		"ntp":       ipsString(resp.NTPServers()),
		"bootfile":  resp.BootFileNameOption(),
		"tftp":      resp.TFTPServerName(),
		"routes":    "",
		"option250": string(resp.Options.Get(dhcpv4.GenericOptionCode(250))),
	}
	if s := resp.DomainSearch(); s != nil {
		got["search"] = strings.Join(s.Labels, " ")
	}
	var routes []string
	for _, r := range resp.ClasslessStaticRoute() {
		routes = append(routes, r.Dest.String()+">"+r.Router.String())
	}
	got["routes"] = strings.Join(routes, " ")
	want := map[string]string{
		"yiaddr":    l.Address.Addr().String(),
		"mask":      net.IP(net.CIDRMask(l.Address.Bits(), 32)).String(),
		"server":    l.ServerID.String(),
		"router":    addrsString(l.Router),
		"dns":       addrsString(l.DNS...),
		"domain":    l.DomainName,
		"hostname":  l.Hostname,
		"lease":     (999 * 24 * time.Hour).String(),
		"mtu":       string([]byte{byte(l.MTU >> 8), byte(l.MTU)}),
		"search":    strings.Join(l.Search, " "),
		"ntp":       addrsString(l.NTPServers...),
		"bootfile":  l.BootFileName,
		"tftp":      l.TFTPServerName,
		"routes":    "",
		"option250": string(l.Private[250]),
	}
	if l.MTU == 0 {
		want["mtu"] = ""
	}
	var wantRoutes []string
	for _, r := range l.Routes { // defaults last
		if r.Dst.Bits() > 0 {
			wantRoutes = append(wantRoutes, r.Dst.String()+">"+r.Gateway.String())
		}
	}
	for _, r := range l.Routes {
		if r.Dst.Bits() == 0 {
			wantRoutes = append(wantRoutes, r.Dst.String()+">"+r.Gateway.String())
		}
	}
	want["routes"] = strings.Join(wantRoutes, " ")
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("%s: %q, want %q", k, got[k], want[k])
		}
	}
}

func ipsString(ips []net.IP) string {
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, ",")
}

func addrsString(as ...netip.Addr) string {
	var s []string
	for _, a := range as {
		if a.IsValid() {
			s = append(s, a.String())
		}
	}
	return strings.Join(s, ",")
}

// TestReplyBridgeLease checks a bridge binding's lease: the IPAM
// address with its routes (the default route last in option 121) and
// the dhcpOptions of the interface.
func TestReplyBridgeLease(t *testing.T) {
	l := dhcp.Lease{
		ClientMAC: guestMAC,
		Address:   netip.MustParsePrefix("10.250.7.100/24"),
		ServerID:  netip.MustParseAddr("169.254.75.10"),
		Router:    netip.MustParseAddr("10.250.7.1"),
		Routes: []dhcp.Route{
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.250.7.1")},
			{Dst: netip.MustParsePrefix("192.168.40.0/22"), Gateway: netip.MustParseAddr("10.250.7.254")},
		},
		Hostname: "vm2",
	}
	l, err := dhcp.WithInterfaceOptions(l, &kubevirtv1.DHCPOptions{
		BootFileName: "pxelinux.0", TFTPServerName: "tftp.example", NTPServers: []string{"10.250.7.3"},
		PrivateOptions: []kubevirtv1.DHCPPrivateOptions{{Option: 250, Value: "extra"}},
	}, "spec.domain.devices.interfaces[0].dhcpOptions")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := dhcp.Reply(request(t, guestMAC, dhcpv4.MessageTypeDiscover), l)
	if err != nil || resp == nil {
		t.Fatalf("reply %v, %v", resp, err)
	}
	checkLease(t, resp, l)
}

// TestWithInterfaceOptionsRefuses names the field of each bad value.
func TestWithInterfaceOptionsRefuses(t *testing.T) {
	const p = "spec.domain.devices.interfaces[1].dhcpOptions"
	for _, tc := range []struct {
		opts *kubevirtv1.DHCPOptions
		want string
	}{
		{&kubevirtv1.DHCPOptions{NTPServers: []string{"ntp.example"}}, p + `.ntpServers[0]: "ntp.example": expected an IPv4 address`},
		{&kubevirtv1.DHCPOptions{NTPServers: []string{"10.0.0.1", "fd00::1"}}, p + `.ntpServers[1]: "fd00::1": expected an IPv4 address`},
		{&kubevirtv1.DHCPOptions{PrivateOptions: []kubevirtv1.DHCPPrivateOptions{{Option: 42, Value: "x"}}}, p + ".privateOptions[0].option: 42: expected 224 to 254"},
		{&kubevirtv1.DHCPOptions{PrivateOptions: []kubevirtv1.DHCPPrivateOptions{{Option: 240, Value: "x"}, {Option: 240, Value: "y"}}}, p + ".privateOptions[1].option: 240 is given twice"},
	} {
		_, err := dhcp.WithInterfaceOptions(masqueradeLease(), tc.opts, p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.want)
		}
	}
}

// TestLeaseValidate refuses what cannot be offered.
func TestLeaseValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*dhcp.Lease)
		want string
	}{
		{func(l *dhcp.Lease) { l.ClientMAC = nil }, "client MAC"},
		{func(l *dhcp.Lease) { l.Address = netip.MustParsePrefix("fd00::2/64") }, "expected an IPv4 address with its prefix length"},
		{func(l *dhcp.Lease) { l.ServerID = netip.Addr{} }, "server identifier"},
		{func(l *dhcp.Lease) { l.DNS = []netip.Addr{netip.MustParseAddr("fd00::53")} }, "server fd00::53: expected an IPv4 address"},
		{func(l *dhcp.Lease) { l.Private = map[uint8][]byte{7: nil} }, "private option 7"},
	} {
		l := masqueradeLease()
		tc.mod(&l)
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	if err := masqueradeLease().Validate(); err != nil {
		t.Errorf("valid lease: %v", err)
	}
}
