package netattach_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/network/netattach"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// nadDir writes NetworkAttachmentDefinition configs for DirSource:
// <dir>/<namespace>/<name>.conf.
func nadDir(t *testing.T, confs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for key, conf := range confs {
		p := filepath.Join(dir, key+".conf")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bridgeConf is a CNI bridge network on VLAN vlan (0: none) with MTU
// 1400, macspoofchk and host-local IPAM in ipamDir.
func bridgeConf(bridge string, vlan int, subnet, ipamDir string) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","type":"bridge","bridge":%q,"vlan":%d,"mtu":1400,"macspoofchk":true,
 "ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"dataDir":%q}}`, bridge, vlan, subnet, ipamDir)
}

// vlanFiltering reports whether the kernel can filter VLANs on a bridge
// (CONFIG_BRIDGE_VLAN_FILTERING; the machines of this project lack it),
// probed in the namespace at path.
func vlanFiltering(t *testing.T, path string) bool {
	t.Helper()
	ok := false
	in(t, path, func() error {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = "cvprobe0"
		yes := true
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs, VlanFiltering: &yes}); err == nil {
			ok = true
			l, _ := netlink.LinkByName("cvprobe0")
			if l != nil {
				_ = netlink.LinkDel(l)
			}
		}
		return nil
	})
	return ok
}

// vmiOn gives a VMI named name with one bridge-bound NIC "blue" on the
// multus network nad (and a fresh UID).
func vmiOn(name, nad string) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name, vmi.UID = "tenant", name, types.UID(uuid.NewString())
	q := resource.MustParse("64Mi")
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	vmi.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "blue", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}}
	vmi.Spec.Networks = []kubevirtv1.Network{{Name: "blue", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: nad}}}}
	return vmi
}

// eventually polls cond until it holds; guard is a hang guard only.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = cond(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// TestTwoVMIsOnOneBridge: two VMIs on one CNI bridge network. Setup runs
// CNI ADD through libcni into each VMI's namespace (net1, with the NIC's
// MAC): the host veth carries VLAN 100 (PVID, untagged), MTU 1400 and an
// nftables macspoofchk rule for the VM's MAC; IPAM reserves an address;
// the plugin's CHECK passes. A stand-in VM per VMI (a namespace behind a
// veth named like the VM's tap, with the VM's MAC and the reserved IP) is
// bound by Plumb; the two ping each other and learn each other's MACs;
// Check passes after the binding. Teardown (CNI DEL, namespace removal)
// leaves no veth, tap, namespace, nftables rule or IP reservation, and
// runs again without error.
func TestTwoVMIsOnOneBridge(t *testing.T) {
	requireRoot(t)
	requireTool(t, "ping", "iputils-ping")
	requireTool(t, "nft", "nftables")
	requireTool(t, "nsenter", "util-linux")
	bin := pluginDir(t)
	id := os.Getpid() % 100000
	hostNS := newNetns(t, fmt.Sprintf("cvn-h-%d", id))
	ipam := t.TempDir()
	vlan := 0
	if vlanFiltering(t, hostNS) {
		vlan = 100
	} else {
		t.Log("this kernel has no bridge VLAN filtering: the network runs without VLAN; TestVLANWithoutKernelSupport covers the refusal")
	}
	src := netattach.DirSource{Dir: nadDir(t, map[string]string{"tenant/blue-net": bridgeConf("cvbr100", vlan, "10.99.7.0/24", ipam)})}
	opts := netattach.DefaultOptions()
	opts.BinDirs, opts.CacheDir, opts.HostNetns = []string{bin}, t.TempDir(), hostNS
	att, err := netattach.NewAttacher(opts)
	if err != nil {
		t.Fatal(err)
	}
	nets := &netattach.VMINetworks{Source: src, Attacher: att}

	type vm struct {
		vmi    *kubevirtv1.VirtualMachineInstance
		mac    string
		ip     *net.IPNet
		veth   string // host veth
		guest  string // stand-in guest namespace
		tapped string // tap name
	}
	vms := []*vm{{vmi: vmiOn("a", "blue-net")}, {vmi: vmiOn("b", "tenant/blue-net")}}
	for i, v := range vms {
		v.mac = domain.MAC(string(v.vmi.UID), "blue")
		t.Cleanup(func() { _ = nets.Teardown(v.vmi.Namespace, v.vmi.Name, v.vmi.UID) })
		start := time.Now()
		taps, err := nets.Setup(v.vmi)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Setup (namespace + CNI ADD) of %s: %s", v.vmi.Name, time.Since(start))
		tap, ok := taps["blue"]
		if want := (domain.Tap{Name: netattach.TapName(v.vmi.UID, 1), MTU: 1400}); !ok || tap != want {
			t.Fatalf("taps %v, want blue: %+v", taps, want)
		}
		v.tapped = tap.Name
		// Setup again: the cache says net1 is attached, no second ADD
		if _, err := nets.Setup(v.vmi); err != nil {
			t.Fatalf("second Setup: %v", err)
		}
		cached, err := att.Cached(string(v.vmi.UID))
		if err != nil || len(cached) != 1 || cached[0].IfName != "net1" {
			t.Fatalf("cached attachments %v (%v), want one on net1", cached, err)
		}
		res, err := att.CachedResult(cached[0])
		if err != nil {
			t.Fatal(err)
		}
		if len(res.IPs) != 1 {
			t.Fatalf("result IPs %v, want one", res.IPs)
		}
		v.ip = &res.IPs[0].Address
		for _, it := range res.Interfaces {
			if it.Sandbox == "" && it.Name != "cvbr100" {
				v.veth = it.Name
			}
			if it.Sandbox != "" && it.Mac != v.mac {
				t.Errorf("pod interface MAC %s, want the NIC's %s", it.Mac, v.mac)
			}
		}
		// the plugin's own CHECK, before the binding changes the pod interface
		conf, _, err := netattach.ParseConfig("blue-net", cached[0].Config)
		if err != nil {
			t.Fatal(err)
		}
		if err := att.Check(t.Context(), conf, netattach.Endpoint{ContainerID: string(v.vmi.UID), Netns: netattach.NetnsPath(netattach.NetnsName(v.vmi.UID)), IfName: "net1"}); err != nil {
			t.Errorf("CNI CHECK: %v", err)
		}
		// the stand-in VM: the "tap" in the host namespace, the guest's
		// NIC (the VM's MAC, the reserved IP) in a namespace of its own
		v.guest = newNetns(t, fmt.Sprintf("cvn-g%d-%d", i, id))
		vethPair(t, hostNS, v.tapped, "eth0", v.guest, v.mac, v.ip.String())
		start = time.Now()
		if err := nets.Plumb(v.vmi); err != nil {
			t.Fatal(err)
		}
		t.Logf("Plumb of %s: %s", v.vmi.Name, time.Since(start))
		if err := nets.Check(v.vmi); err != nil {
			t.Errorf("Check after Plumb: %v", err)
		}
	}

	// the host side: VLAN, MTU, macspoofchk
	in(t, hostNS, func() error {
		vlans, err := netlink.BridgeVlanList()
		if err != nil {
			return err
		}
		for _, v := range vms {
			l, err := netlink.LinkByName(v.veth)
			if err != nil {
				return fmt.Errorf("host veth %s: %w", v.veth, err)
			}
			if l.Attrs().MTU != 1400 {
				t.Errorf("host veth %s: MTU %d, want 1400", v.veth, l.Attrs().MTU)
			}
			var got []string
			pvid := false
			for _, vi := range vlans[int32(l.Attrs().Index)] {
				got = append(got, vi.String())
				if vi.Vid == 100 && vi.Flags&nl.BRIDGE_VLAN_INFO_PVID != 0 && vi.Flags&nl.BRIDGE_VLAN_INFO_UNTAGGED != 0 {
					pvid = true
				}
			}
			if vlan != 0 && (!pvid || len(got) != 1) {
				t.Errorf("host veth %s: VLANs %v, want only 100 as PVID untagged", v.veth, got)
			}
		}
		return nil
	})
	ruleset, err := run(hostNS, "nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vms {
		if !strings.Contains(ruleset, v.mac) {
			t.Errorf("nftables ruleset has no macspoofchk rule for %s:\n%s", v.mac, ruleset)
		}
	}

	// traffic between the two VMs, with their MACs
	a, b := vms[0], vms[1]
	start := time.Now()
	if out, err := run(a.guest, "ping", "-c", "3", "-i", "0.2", "-W", "2", b.ip.IP.String()); err != nil {
		t.Fatalf("ping from VM a to VM b: %v\n%s", err, out)
	}
	t.Logf("3 pings a -> b: %s", time.Since(start))
	if out, err := run(b.guest, "ping", "-c", "1", "-W", "2", a.ip.IP.String()); err != nil {
		t.Fatalf("ping from VM b to VM a: %v\n%s", err, out)
	}
	for _, pair := range [][2]*vm{{a, b}, {b, a}} {
		in(t, pair[0].guest, func() error {
			neigh, err := netlink.NeighList(0, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			for _, n := range neigh {
				if n.IP.Equal(pair[1].ip.IP) {
					if n.HardwareAddr.String() != pair[1].mac {
						return fmt.Errorf("VM %s: neighbour %s at %s, want %s", pair[0].vmi.Name, n.IP, n.HardwareAddr, pair[1].mac)
					}
					return nil
				}
			}
			return fmt.Errorf("VM %s: no neighbour entry for %s in %v", pair[0].vmi.Name, pair[1].ip.IP, neigh)
		})
	}

	// teardown
	for _, v := range vms {
		start := time.Now()
		if err := nets.Teardown(v.vmi.Namespace, v.vmi.Name, v.vmi.UID); err != nil {
			t.Fatal(err)
		}
		t.Logf("Teardown (CNI DEL + namespace) of %s: %s", v.vmi.Name, time.Since(start))
		if err := nets.Teardown(v.vmi.Namespace, v.vmi.Name, v.vmi.UID); err != nil {
			t.Errorf("second Teardown: %v", err)
		}
		if _, err := os.Stat(netattach.NetnsPath(netattach.NetnsName(v.vmi.UID))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s still there (%v)", netattach.NetnsName(v.vmi.UID), err)
		}
		if c, _ := att.Cached(string(v.vmi.UID)); len(c) != 0 {
			t.Errorf("CNI cache still holds %d attachments of %s", len(c), v.vmi.Name)
		}
	}
	in(t, hostNS, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		var left []string
		for _, l := range links {
			if l.Type() == "veth" || l.Type() == "tuntap" || strings.HasPrefix(l.Attrs().Name, "cvt") {
				left = append(left, l.Attrs().Name)
			}
		}
		if len(left) > 0 {
			t.Errorf("left in the host namespace: %v", left)
		}
		return nil
	})
	for _, v := range vms {
		eventually(t, "the stand-in guest's NIC goes with the VMI namespace", func() error {
			var err error
			in(t, v.guest, func() error {
				if _, lerr := netlink.LinkByName("eth0"); lerr == nil {
					err = fmt.Errorf("VM %s: eth0 (the tap's peer) still exists", v.vmi.Name)
				}
				return nil
			})
			return err
		})
	}
	reserved, _ := filepath.Glob(filepath.Join(ipam, "blue-net", "10.*"))
	if len(reserved) != 0 {
		t.Errorf("host-local reservations left: %v", reserved)
	}
	if ruleset, err := run(hostNS, "nft", "list", "ruleset"); err != nil || strings.Contains(ruleset, a.mac) || strings.Contains(ruleset, b.mac) {
		t.Errorf("macspoofchk rules left (%v):\n%s", err, ruleset)
	}
}

// TestVLANWithoutKernelSupport: on a kernel without bridge VLAN filtering
// a network with a VLAN is refused by Setup with the plugin's error naming
// the VMI, the network and the NetworkAttachmentDefinition's CNI network,
// and Teardown leaves nothing. On a kernel with it, the VLAN is checked
// by TestTwoVMIsOnOneBridge instead.
func TestVLANWithoutKernelSupport(t *testing.T) {
	requireRoot(t)
	bin := pluginDir(t)
	hostNS := newNetns(t, fmt.Sprintf("cvn-v-%d", os.Getpid()%100000))
	if vlanFiltering(t, hostNS) {
		t.Skip("this kernel filters VLANs on bridges: TestTwoVMIsOnOneBridge checks the VLAN")
	}
	opts := netattach.DefaultOptions()
	opts.BinDirs, opts.CacheDir, opts.HostNetns = []string{bin}, t.TempDir(), hostNS
	att, err := netattach.NewAttacher(opts)
	if err != nil {
		t.Fatal(err)
	}
	nets := &netattach.VMINetworks{Source: netattach.DirSource{Dir: nadDir(t, map[string]string{"tenant/vlan": bridgeConf("cvbr5", 5, "10.99.8.0/24", t.TempDir())})}, Attacher: att}
	vmi := vmiOn("v", "vlan")
	_, err = nets.Setup(vmi)
	if err == nil || !strings.Contains(err.Error(), `VirtualMachineInstance tenant/v: network "blue": CNI ADD of network vlan`) {
		t.Fatalf("Setup: %v, want the refused CNI ADD named", err)
	}
	t.Logf("refused: %v", err)
	if err := nets.Teardown(vmi.Namespace, vmi.Name, vmi.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(netattach.NetnsPath(netattach.NetnsName(vmi.UID))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace left after Teardown (%v)", err)
	}
}
