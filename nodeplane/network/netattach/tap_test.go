package netattach_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/converge-dev/converge/nodeplane/network/netattach"
)

// arpRequest gives an Ethernet broadcast ARP request "who has target, tell
// ip (mac)".
func arpRequest(mac net.HardwareAddr, ip, target net.IP) []byte {
	var b bytes.Buffer
	b.Write([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	b.Write(mac)
	_ = binary.Write(&b, binary.BigEndian, uint16(0x0806))
	_ = binary.Write(&b, binary.BigEndian, []uint16{1, 0x0800}) // htype Ethernet, ptype IPv4
	b.Write([]byte{6, 4})
	_ = binary.Write(&b, binary.BigEndian, uint16(1)) // request
	b.Write(mac)
	b.Write(ip.To4())
	b.Write(make([]byte, 6))
	b.Write(target.To4())
	return b.Bytes()
}

// awaitARPReply reads frames from tap until an ARP reply from ip to mac
// arrives and gives the replier's MAC; guard is a hang guard only.
func awaitARPReply(tap *os.File, mac net.HardwareAddr, ip net.IP, guard time.Duration) (net.HardwareAddr, error) {
	if err := tap.SetReadDeadline(time.Now().Add(guard)); err != nil {
		return nil, err
	}
	buf := make([]byte, 2048)
	for {
		n, err := tap.Read(buf)
		if err != nil {
			return nil, fmt.Errorf("reading the tap: %w", err)
		}
		f := buf[:n]
		if n < 42 || binary.BigEndian.Uint16(f[12:]) != 0x0806 || binary.BigEndian.Uint16(f[20:]) != 2 {
			continue
		}
		if bytes.Equal(f[0:6], mac) && net.IP(f[28:32]).Equal(ip) {
			return net.HardwareAddr(append([]byte(nil), f[22:28]...)), nil
		}
	}
}

// TestTapTrafficAfterMove: a tap opened (as QEMU opens it) in one
// namespace and moved by Bind into the VMI's namespace, onto the bridge
// with the pod interface, still carries traffic both ways through the
// open file: an ARP request written to it reaches the peer behind the pod
// interface, and the reply comes back. Bind twice changes nothing.
func TestTapTrafficAfterMove(t *testing.T) {
	requireRoot(t)
	id := os.Getpid() % 100000
	hostNS := newNetns(t, fmt.Sprintf("cvt-h-%d", id))
	vmiNS := newNetns(t, fmt.Sprintf("cvt-v-%d", id))
	peerNS := newNetns(t, fmt.Sprintf("cvt-p-%d", id))
	peerMAC := "02:00:00:00:06:02"
	vethPair(t, vmiNS, "net1", "eth0", peerNS, peerMAC, "10.99.6.2/24")
	tap := openTap(t, hostNS, "cvtap0")

	b := netattach.Binding{Netns: vmiNS, HostNetns: hostNS, PodIf: "net1", Tap: "cvtap0", Bridge: netattach.BridgeName("net1"), MTU: 1400}
	start := time.Now()
	if err := netattach.Bind(b); err != nil {
		t.Fatal(err)
	}
	t.Logf("Bind: %s", time.Since(start))
	if err := netattach.Bind(b); err != nil {
		t.Fatalf("second Bind: %v", err)
	}
	if err := netattach.Verify(b); err != nil {
		t.Fatal(err)
	}
	in(t, hostNS, func() error {
		if _, err := netlink.LinkByName("cvtap0"); err == nil {
			return errors.New("cvtap0 is still in the host namespace")
		}
		return nil
	})
	in(t, vmiNS, func() error {
		tl, err := netlink.LinkByName("cvtap0")
		if err != nil {
			return err
		}
		if tl.Attrs().MTU != 1400 {
			return fmt.Errorf("tap MTU %d, want 1400", tl.Attrs().MTU)
		}
		pod, err := netlink.LinkByName("net1")
		if err != nil {
			return err
		}
		addrs, _ := netlink.AddrList(pod, netlink.FAMILY_V4)
		if len(addrs) != 0 || pod.Attrs().HardwareAddr[0]&2 == 0 {
			return fmt.Errorf("pod interface: addresses %v, MAC %s; want none and a locally administered MAC", addrs, pod.Attrs().HardwareAddr)
		}
		return nil
	})

	vmMAC, _ := net.ParseMAC("52:54:00:06:00:01")
	// a guest retries ARP; so does the test: a frame sent while the new
	// ports settle may be lost
	req := arpRequest(vmMAC, net.ParseIP("10.99.6.1"), net.ParseIP("10.99.6.2"))
	var got net.HardwareAddr
	var err error
	sent := time.Now()
	for attempt := 1; attempt <= 20 && got == nil; attempt++ {
		if _, err = tap.Write(req); err != nil {
			t.Fatalf("writing to the tap: %v", err)
		}
		if got, err = awaitARPReply(tap, vmMAC, net.ParseIP("10.99.6.2"), 500*time.Millisecond); err == nil {
			t.Logf("ARP reply through the moved tap after %d request(s), %s", attempt, time.Since(sent))
		}
	}
	if got == nil {
		o1, _ := run(vmiNS, "ip", "-s", "link")
		o2, _ := run(peerNS, "ip", "-s", "link")
		t.Fatalf("no ARP reply through the moved tap after 20 requests: %v\nVMI namespace:\n%s\npeer namespace:\n%s", err, o1, o2)
	}
	if got.String() != peerMAC {
		t.Errorf("ARP reply from %s, want %s", got, peerMAC)
	}
}
