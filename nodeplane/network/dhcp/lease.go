package dhcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// InfiniteLease is the lease time offered: KubeVirt's 999 days
// (pkg/network/dhcp/server infiniteLease), so a guest never renews.
const InfiniteLease = 999 * 24 * time.Hour

// Route is a classless static route (RFC 3442): Gateway unset (invalid)
// means on-link.
type Route struct {
	Dst     netip.Prefix
	Gateway netip.Addr
}

// Lease is what one NIC is offered.
type Lease struct {
	// ClientMAC is the NIC's MAC: requests from any other are not
	// answered (the bridge also carries other hosts' DHCP traffic).
	ClientMAC net.HardwareAddr
	// Address is the NIC's IPv4 address and prefix length.
	Address netip.Prefix
	// ServerID is the server's address (option 54): the in-namespace
	// bridge's address.
	ServerID netip.Addr
	// Router is the default gateway (option 3); unset offers none.
	Router netip.Addr
	// Routes are offered as classless static routes (option 121), the
	// default route last, as KubeVirt's formClasslessRoutes orders them.
	// A client that gets option 121 ignores option 3, so a default route
	// through Router belongs here too when Routes are given.
	Routes []Route
	// DNS servers (option 6) and search domains (option 119).
	DNS    []netip.Addr
	Search []string
	// DomainName (option 15); KubeVirt offers the longest search domain.
	DomainName string
	// Hostname (option 12): the VMI's spec.hostname, else its name.
	Hostname string
	// MTU (option 26); 0 offers none.
	MTU uint16
	// LeaseTime; 0 means InfiniteLease.
	LeaseTime time.Duration
	// The interface's dhcpOptions: BootFileName (option 67),
	// TFTPServerName (option 66), NTPServers (option 42) and Private
	// options (224 to 254).
	BootFileName   string
	TFTPServerName string
	NTPServers     []netip.Addr
	Private        map[uint8][]byte
}

// Validate checks that l can be offered: a 6-byte MAC, an IPv4 address,
// an IPv4 server identifier, and IPv4 everywhere else.
func (l Lease) Validate() error {
	var errs []error
	if len(l.ClientMAC) != 6 {
		errs = append(errs, fmt.Errorf("client MAC %q: expected 6 bytes", l.ClientMAC))
	}
	if !l.Address.IsValid() || !l.Address.Addr().Is4() {
		errs = append(errs, fmt.Errorf("address %s: expected an IPv4 address with its prefix length", l.Address))
	}
	if !l.ServerID.Is4() {
		errs = append(errs, fmt.Errorf("server identifier %s: expected an IPv4 address", l.ServerID))
	}
	if l.Router.IsValid() && !l.Router.Is4() {
		errs = append(errs, fmt.Errorf("router %s: expected an IPv4 address", l.Router))
	}
	for _, r := range l.Routes {
		if !r.Dst.IsValid() || !r.Dst.Addr().Is4() || (r.Gateway.IsValid() && !r.Gateway.Is4()) {
			errs = append(errs, fmt.Errorf("route to %s via %s: expected IPv4", r.Dst, r.Gateway))
		}
	}
	for _, a := range append(append([]netip.Addr(nil), l.DNS...), l.NTPServers...) {
		if !a.Is4() {
			errs = append(errs, fmt.Errorf("server %s: expected an IPv4 address", a))
		}
	}
	for code := range l.Private {
		if code < 224 || code > 254 {
			errs = append(errs, fmt.Errorf("private option %d: expected 224 to 254", code))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("DHCP lease for %s: %w", l.ClientMAC, err)
	}
	return nil
}

// Reply gives the answer to req for l: an OFFER to a DISCOVER, an ACK to
// a REQUEST for l's address (or for none), a NAK to a REQUEST for another
// address (a guest rebooting with an old lease then starts over), and nil
// for everything else (another MAC, a RELEASE, a DECLINE, an INFORM).
func Reply(req *dhcpv4.DHCPv4, l Lease) (*dhcpv4.DHCPv4, error) {
	if req.OpCode != dhcpv4.OpcodeBootRequest || !bytes.Equal(req.ClientHWAddr, l.ClientMAC) {
		return nil, nil
	}
	addr := net.IP(l.Address.Addr().AsSlice())
	server := net.IP(l.ServerID.AsSlice())
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		return dhcpv4.NewReplyFromRequest(req, append([]dhcpv4.Modifier{dhcpv4.WithMessageType(dhcpv4.MessageTypeOffer), dhcpv4.WithYourIP(addr)}, l.modifiers()...)...)
	case dhcpv4.MessageTypeRequest:
		asked := req.RequestedIPAddress()
		if asked == nil && !req.ClientIPAddr.IsUnspecified() {
			asked = req.ClientIPAddr // renewing or rebinding
		}
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(server) {
			return nil, nil // the client chose another server
		}
		if asked != nil && !asked.IsUnspecified() && !asked.Equal(addr) {
			return dhcpv4.NewReplyFromRequest(req, dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
				dhcpv4.WithOption(dhcpv4.OptServerIdentifier(server)),
				dhcpv4.WithOption(dhcpv4.OptMessage(fmt.Sprintf("this NIC's address is %s", addr))))
		}
		return dhcpv4.NewReplyFromRequest(req, append([]dhcpv4.Modifier{dhcpv4.WithMessageType(dhcpv4.MessageTypeAck), dhcpv4.WithYourIP(addr)}, l.modifiers()...)...)
	}
	return nil, nil
}

// modifiers are the options of an OFFER or ACK.
func (l Lease) modifiers() []dhcpv4.Modifier {
	lt := l.LeaseTime
	if lt == 0 {
		lt = InfiniteLease
	}
	m := []dhcpv4.Modifier{
		dhcpv4.WithServerIP(net.IP(l.ServerID.AsSlice())),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP(l.ServerID.AsSlice()))),
		dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(lt)),
		dhcpv4.WithNetmask(net.CIDRMask(l.Address.Bits(), 32)),
	}
	if l.Router.IsValid() {
		m = append(m, dhcpv4.WithRouter(net.IP(l.Router.AsSlice())))
	}
	if len(l.Routes) > 0 {
		m = append(m, dhcpv4.WithOption(dhcpv4.OptClasslessStaticRoute(classless(l.Routes)...)))
	}
	if len(l.DNS) > 0 {
		m = append(m, dhcpv4.WithDNS(ips(l.DNS)...))
	}
	if len(l.Search) > 0 {
		m = append(m, dhcpv4.WithDomainSearchList(l.Search...))
	}
	if l.DomainName != "" {
		m = append(m, dhcpv4.WithOption(dhcpv4.OptDomainName(l.DomainName)))
	}
	if l.Hostname != "" {
		m = append(m, dhcpv4.WithOption(dhcpv4.OptHostName(l.Hostname)))
	}
	if l.MTU > 0 {
		m = append(m, dhcpv4.WithGeneric(dhcpv4.OptionInterfaceMTU, binary.BigEndian.AppendUint16(nil, l.MTU)))
	}
	if l.BootFileName != "" {
		m = append(m, dhcpv4.WithOption(dhcpv4.OptBootFileName(l.BootFileName)))
	}
	if l.TFTPServerName != "" {
		m = append(m, dhcpv4.WithOption(dhcpv4.OptTFTPServerName(l.TFTPServerName)))
	}
	if len(l.NTPServers) > 0 {
		m = append(m, dhcpv4.WithOption(dhcpv4.OptNTPServers(ips(l.NTPServers)...)))
	}
	for code, v := range l.Private {
		m = append(m, dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(code), v))
	}
	return m
}

// classless gives the routes in option 121's order: the default route
// last, because a client adds them in order and the default route's
// gateway may need a route of its own first.
func classless(routes []Route) []*dhcpv4.Route {
	var out, defaults []*dhcpv4.Route
	for _, r := range routes {
		gw := net.IPv4zero
		if r.Gateway.IsValid() {
			gw = net.IP(r.Gateway.AsSlice())
		}
		dr := &dhcpv4.Route{Dest: &net.IPNet{IP: net.IP(r.Dst.Masked().Addr().AsSlice()), Mask: net.CIDRMask(r.Dst.Bits(), 32)}, Router: gw}
		if r.Dst.Bits() == 0 {
			defaults = append(defaults, dr)
		} else {
			out = append(out, dr)
		}
	}
	return append(out, defaults...)
}

func ips(as []netip.Addr) []net.IP {
	out := make([]net.IP, len(as))
	for i, a := range as {
		out[i] = net.IP(a.AsSlice())
	}
	return out
}
