package macpool

import (
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"strings"
)

// MAC is a 48-bit EUI-48 MAC address held in the low 48 bits of an
// integer, so that ranges and the next-fit cursor are plain arithmetic.
type MAC uint64

// maxMAC is ff:ff:ff:ff:ff:ff.
const maxMAC MAC = 1<<48 - 1

// ParseMAC takes a MAC address in any form net.ParseMAC accepts
// (02:00:00:00:00:01, 02-00-00-00-00-01, 0200.0000.0001) and gives it; an
// address that is not 48 bits long is an error.
func ParseMAC(s string) (MAC, error) {
	hw, err := net.ParseMAC(s)
	if err != nil {
		return 0, err
	}
	if len(hw) != 6 {
		return 0, fmt.Errorf("%q is a %d-bit address, want a 48-bit MAC", s, 8*len(hw))
	}
	var m MAC
	for _, b := range hw {
		m = m<<8 | MAC(b)
	}
	return m, nil
}

// String gives the address in KubeVirt's form: six lower-case hex octets
// separated by colons.
func (m MAC) String() string {
	return m.hw().String()
}

// key gives the address as a ConfigMap data key (colons are not allowed
// there): 02-00-00-00-00-01.
func (m MAC) key() string {
	return strings.ReplaceAll(m.String(), ":", "-")
}

func (m MAC) hw() net.HardwareAddr {
	hw := make(net.HardwareAddr, 6)
	for i := 5; i >= 0; i-- {
		hw[i] = byte(m)
		m >>= 8
	}
	return hw
}

// Multicast reports whether the I/G bit (the least significant bit of the
// first octet) is set.
func (m MAC) Multicast() bool { return m>>40&0x01 != 0 }

// LocallyAdministered reports whether the U/L bit (the second least
// significant bit of the first octet) is set.
func (m MAC) LocallyAdministered() bool { return m>>40&0x02 != 0 }

// Range is an inclusive range of MAC addresses, Start ≤ End.
type Range struct {
	Start, End MAC
}

// ParseRange takes the NetworkAddonsConfig spec.kubeMacPool rangeStart and
// rangeEnd and gives the range. As upstream kubemacpool
// (pkg/pool-manager NewPoolManager: checkRange, checkCast), both ends must
// parse, be unicast, and start must not be after end.
func ParseRange(start, end string) (Range, error) {
	s, err := ParseMAC(start)
	if err != nil {
		return Range{}, fmt.Errorf("kubeMacPool.rangeStart: %w", err)
	}
	e, err := ParseMAC(end)
	if err != nil {
		return Range{}, fmt.Errorf("kubeMacPool.rangeEnd: %w", err)
	}
	r := Range{Start: s, End: e}
	return r, r.Validate()
}

// Validate reports a range whose start is after its end or whose ends are
// multicast addresses.
func (r Range) Validate() error {
	if r.Start > r.End {
		return fmt.Errorf("kubeMacPool: rangeStart %s is after rangeEnd %s", r.Start, r.End)
	}
	if r.Start.Multicast() || r.End.Multicast() {
		return fmt.Errorf("kubeMacPool: range %s is not unicast (the multicast bit of the first octet is set)", r)
	}
	if r.End > maxMAC {
		return fmt.Errorf("kubeMacPool: range end %#x is not a 48-bit MAC", uint64(r.End))
	}
	return nil
}

// Size gives the number of addresses in the range.
func (r Range) Size() uint64 { return uint64(r.End-r.Start) + 1 }

// Contains reports whether m is in the range.
func (r Range) Contains(m MAC) bool { return m >= r.Start && m <= r.End }

// IsZero reports whether the range is unset.
func (r Range) IsZero() bool { return r == Range{} }

// String gives "start–end".
func (r Range) String() string { return r.Start.String() + "–" + r.End.String() }

// RandomRange takes a source of randomness (nil means crypto/rand) and
// gives a range of 2^24 addresses 02:xx:xx:00:00:00–02:xx:xx:ff:ff:ff with
// two random middle octets: the first octet 0x02 has the locally
// administered bit set and the multicast bit clear. This is the range
// cluster-network-addons-operator fills into an empty
// spec.kubeMacPool (pkg/network/kubemacpool.go, generateRandomMacPrefix).
func RandomRange(rnd io.Reader) (Range, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var b [2]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return Range{}, fmt.Errorf("kubeMacPool: generating a random range: %w", err)
	}
	prefix := MAC(0x02)<<40 | MAC(b[0])<<32 | MAC(b[1])<<24
	return Range{Start: prefix, End: prefix | 0xffffff}, nil
}
