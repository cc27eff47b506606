package dhcp

import (
	"errors"
	"fmt"
	"net/netip"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// OptionError is a dhcpOptions value that cannot be served: Field is its
// path below dhcpOptions (ntpServers[1], privateOptions[0].option).
type OptionError struct {
	Field, Reason string
}

// CheckInterfaceOptions gives every value of o that WithInterfaceOptions
// refuses (none for nil o).
func CheckInterfaceOptions(o *kubevirtv1.DHCPOptions) []OptionError {
	_, errs := withOptions(Lease{}, o)
	return errs
}

// WithInterfaceOptions gives l with an interface's dhcpOptions, as
// KubeVirt's prepareDHCPOptions adds them (pkg/network/dhcp/server): the
// boot file name (option 67), the TFTP server name (option 66), the NTP
// servers (option 42, IPv4 addresses) and the private options (224 to
// 254). path is the dhcpOptions' field path, for the errors; KubeVirt
// drops a private option out of range silently, converge refuses it.
func WithInterfaceOptions(l Lease, o *kubevirtv1.DHCPOptions, path string) (Lease, error) {
	l, oerrs := withOptions(l, o)
	var errs []error
	for _, e := range oerrs {
		errs = append(errs, fmt.Errorf("%s.%s: %s", path, e.Field, e.Reason))
	}
	return l, errors.Join(errs...)
}

func withOptions(l Lease, o *kubevirtv1.DHCPOptions) (Lease, []OptionError) {
	if o == nil {
		return l, nil
	}
	var errs []OptionError
	l.BootFileName, l.TFTPServerName = o.BootFileName, o.TFTPServerName
	l.NTPServers = nil
	for i, s := range o.NTPServers {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			errs = append(errs, OptionError{fmt.Sprintf("ntpServers[%d]", i), fmt.Sprintf("%q: expected an IPv4 address", s)})
			continue
		}
		l.NTPServers = append(l.NTPServers, a)
	}
	l.Private = nil
	if len(o.PrivateOptions) > 0 {
		l.Private = map[uint8][]byte{}
	}
	for i, p := range o.PrivateOptions {
		f := fmt.Sprintf("privateOptions[%d].option", i)
		if p.Option < 224 || p.Option > 254 {
			errs = append(errs, OptionError{f, fmt.Sprintf("%d: expected 224 to 254 (DHCP's private-use range)", p.Option)})
			continue
		}
		if _, dup := l.Private[uint8(p.Option)]; dup {
			errs = append(errs, OptionError{f, fmt.Sprintf("%d is given twice", p.Option)})
			continue
		}
		l.Private[uint8(p.Option)] = []byte(p.Value)
	}
	return l, errs
}
