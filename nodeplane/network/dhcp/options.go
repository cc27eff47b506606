package dhcp

import (
	"errors"
	"fmt"
	"net/netip"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// WithInterfaceOptions gives l with an interface's dhcpOptions, as
// KubeVirt's prepareDHCPOptions adds them (pkg/network/dhcp/server): the
// boot file name (option 67), the TFTP server name (option 66), the NTP
// servers (option 42, IPv4 addresses) and the private options (224 to
// 254). path is the dhcpOptions' field path, for the errors; KubeVirt
// drops a private option out of range silently, converge refuses it.
func WithInterfaceOptions(l Lease, o *kubevirtv1.DHCPOptions, path string) (Lease, error) {
	if o == nil {
		return l, nil
	}
	var errs []error
	l.BootFileName, l.TFTPServerName = o.BootFileName, o.TFTPServerName
	l.NTPServers = nil
	for i, s := range o.NTPServers {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			errs = append(errs, fmt.Errorf("%s.ntpServers[%d]: %q: expected an IPv4 address", path, i, s))
			continue
		}
		l.NTPServers = append(l.NTPServers, a)
	}
	if len(o.PrivateOptions) > 0 {
		l.Private = map[uint8][]byte{}
	}
	for i, p := range o.PrivateOptions {
		if p.Option < 224 || p.Option > 254 {
			errs = append(errs, fmt.Errorf("%s.privateOptions[%d].option: %d: expected 224 to 254 (DHCP's private-use range)", path, i, p.Option))
			continue
		}
		if _, dup := l.Private[uint8(p.Option)]; dup {
			errs = append(errs, fmt.Errorf("%s.privateOptions[%d].option: %d is given twice", path, i, p.Option))
			continue
		}
		l.Private[uint8(p.Option)] = []byte(p.Value)
	}
	return l, errors.Join(errs...)
}
