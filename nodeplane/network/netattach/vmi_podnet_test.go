package netattach_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/network/masquerade"
	"github.com/converge-dev/converge/nodeplane/network/netattach"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// podNet is a node with a pod network: the runtime's conflist (bridge
// cvpod0 with the gateway 10.244.77.1 in the test's host namespace, MTU
// 1450, host-local leases in leases) in confDir, a NetworkAttachment-
// Definition blue-net (bridge cvblue0, 10.99.8.0/24), and a resolv.conf.
type podNet struct {
	hostNS, leases string
	nets           *netattach.VMINetworks
	podAtt         *netattach.Attacher
	newNets        func() *netattach.VMINetworks // a restarted agent's
}

func newPodNet(t *testing.T) podNet {
	t.Helper()
	requireRoot(t)
	requireTool(t, "nsenter", "util-linux")
	bin := pluginDir(t)
	p := podNet{hostNS: newNetns(t, fmt.Sprintf("cvn-p-%d", os.Getpid()%100000)), leases: t.TempDir()}
	confDir, dir := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(confDir, "10-podnet.conflist"), `{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"bridge","bridge":"cvpod0","isGateway":true,"ipMasq":false,"mtu":1450,
 "ipam":{"type":"host-local","dataDir":"`+p.leases+`","ranges":[[{"subnet":"10.244.77.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}}]}`)
	resolv := filepath.Join(dir, "resolv.conf")
	writeFile(t, resolv, "search tenant.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\n")
	src := netattach.DirSource{Dir: nadDir(t, map[string]string{"tenant/blue-net": `{"cniVersion":"1.0.0","type":"bridge","bridge":"cvblue0","isGateway":true,
 "ipam":{"type":"host-local","ranges":[[{"subnet":"10.99.8.0/24","gateway":"10.99.8.1"}]],"routes":[{"dst":"192.168.40.0/22","gw":"10.99.8.254"}],"dataDir":"` + p.leases + `"}}`})}
	attacher := func(cache string) *netattach.Attacher {
		o := netattach.DefaultOptions()
		o.BinDirs, o.CacheDir, o.HostNetns = []string{bin}, filepath.Join(dir, cache), p.hostNS
		a, err := netattach.NewAttacher(o)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	p.newNets = func() *netattach.VMINetworks {
		p.podAtt = attacher("pod")
		return &netattach.VMINetworks{Source: src, Attacher: attacher("nad"), ResolvConf: resolv,
			Pod: &netattach.PodNetworkSetup{Network: netattach.PodNetwork{ConfDir: confDir}, Attacher: p.podAtt}}
	}
	p.nets = p.newNets()
	t.Cleanup(p.nets.Close)
	return p
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// guestNIC makes the stand-in of a VM NIC: a veth named like the VM's
// tap in the host namespace (where libvirt creates taps) whose peer,
// with the NIC's MAC, is ifName in the guest namespace, up and without
// address (the guest asks DHCP).
func guestNIC(t *testing.T, hostNS, tap, guestNS, ifName, mac string) {
	t.Helper()
	peer, err := os.Open(guestNS)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	in(t, hostNS, func() error {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = tap
		hw, _ := net.ParseMAC(mac)
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: ifName, PeerHardwareAddr: hw, PeerNamespace: netlink.NsFd(int(peer.Fd()))})
	})
	in(t, guestNS, func() error {
		for _, name := range []string{"lo", ifName} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		return nil
	})
}

// udhcpc runs busybox's udhcpc on ifName in the guest namespace, as the
// test guest does, and gives the lease's variables; its script applies
// the address and, with a router, the default route.
func udhcpc(t *testing.T, guestNS, ifName string) map[string]string {
	t.Helper()
	busybox, err := exec.LookPath("busybox")
	vmtest.Require(t, err == nil, "busybox not found: apt-get install -y --no-install-recommends busybox-static")
	dir := t.TempDir()
	env, script := filepath.Join(dir, "env"), filepath.Join(dir, "script")
	writeFile(t, script, "#!/bin/sh\nenv > "+env+".$1\nif [ \"$1\" = bound ]; then ip addr add $ip/$mask dev $interface; [ -n \"$router\" ] && ip route add default via $router dev $interface; fi\nexit 0\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net="+guestNS, busybox, "udhcpc", "-f", "-q", "-n", "-t", "5", "-T", "1", "-i", ifName, "-s", script,
		"-O", "search", "-O", "staticroutes", "-O", "mtu", "-O", "hostname", "-O", "domain")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("udhcpc on %s: %v\n%s", ifName, err, out)
	}
	raw, err := os.ReadFile(env + ".bound")
	if err != nil {
		t.Fatalf("udhcpc on %s did not bind: %v", ifName, err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = strings.TrimSpace(v)
		}
	}
	return vars
}

func checkVars(t *testing.T, what string, vars, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if vars[k] != w {
			t.Errorf("%s: udhcpc's %s=%q, want %q", what, k, vars[k], w)
		}
	}
}

// serveTCP answers each connection on addr in the namespace at path with
// the address it came from.
func serveTCP(t *testing.T, path, addr string) {
	t.Helper()
	var l net.Listener
	in(t, path, func() error {
		var err error
		l, err = net.Listen("tcp4", addr)
		return err
	})
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

// dialTCP connects from the namespace at path and gives the answer.
func dialTCP(t *testing.T, path, addr string) (string, error) {
	t.Helper()
	var got string
	var derr error
	in(t, path, func() error {
		c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
		if err != nil {
			derr = err
			return nil
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		got, derr = string(b), err
		return nil
	})
	return got, derr
}

func podIP(t *testing.T, att *netattach.Attacher, uid types.UID) string {
	t.Helper()
	cached, err := att.Cached(string(uid))
	if err != nil || len(cached) != 1 || cached[0].IfName != "eth0" {
		t.Fatalf("pod network attachments %v (%v), want one on eth0", cached, err)
	}
	res, err := att.CachedResult(cached[0])
	if err != nil || len(res.IPs) != 1 {
		t.Fatalf("pod network result %v (%v)", res, err)
	}
	return res.IPs[0].Address.IP.String()
}

// TestDefaultPodNetworkMasquerade is a VMI that declares no interface
// on a node with a pod network, as the agent runs it:
//   - Setup attaches the pod network (the runtime's conflist, the real
//     bridge and host-local plugins) as eth0 and gives the tap of
//     KubeVirt's default interface, with the pod interface's MTU;
//   - Plumb makes the masquerade binding and serves DHCP: a guest
//     stand-in behind the tap running busybox udhcpc gets 10.0.2.2/24,
//     router 10.0.2.1, the resolv.conf's DNS and search, its host name
//     and the MTU;
//   - the host reaches a port of the guest through the pod IP (no ports
//     declared: every port), and the guest reaches the host seen as the
//     pod IP;
//   - a restarted agent's Check serves DHCP again and puts a deleted NAT
//     table back;
//   - Teardown stops DHCP, releases the pod IP and removes the namespace.
func TestDefaultPodNetworkMasquerade(t *testing.T) {
	p := newPodNet(t)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name, vmi.UID = "tenant", "web", types.UID(uuid.NewString())
	q := resource.MustParse("64Mi")
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	t.Cleanup(func() { _ = p.nets.Teardown(vmi.Namespace, vmi.Name, vmi.UID) })
	netnsPath := netattach.NetnsPath(netattach.NetnsName(vmi.UID))

	taps, err := p.nets.Setup(vmi)
	if err != nil {
		t.Fatal(err)
	}
	tap := netattach.TapName(vmi.UID, 0)
	if want := (domain.Tap{Name: tap, MTU: 1450}); len(taps) != 1 || taps["default"] != want {
		t.Fatalf("taps %v, want default: %+v", taps, want)
	}
	ip := podIP(t, p.podAtt, vmi.UID)
	// the domain the agent builds with these taps has KubeVirt's default NIC
	o := domain.DefaultOptions()
	o.ResolveTap = func(_ string, n kubevirtv1.Network) (domain.Tap, bool, error) {
		t, ok := taps[n.Name]
		return t, ok, nil
	}
	d, err := domain.Build(vmi, o)
	if err != nil {
		t.Fatal(err)
	}
	mac := domain.MAC(string(vmi.UID), "default")
	if len(d.Devices.Interfaces) != 1 || d.Devices.Interfaces[0].Target.Dev != tap || d.Devices.Interfaces[0].MAC.Address != mac {
		t.Fatalf("domain NICs %+v, want the tap %s with %s", d.Devices.Interfaces, tap, mac)
	}

	guest := newNetns(t, fmt.Sprintf("cvn-pg-%d", os.Getpid()%100000))
	guestNIC(t, p.hostNS, tap, guest, "eth0", mac)
	if err := p.nets.Plumb(vmi); err != nil {
		t.Fatal(err)
	}
	vars := udhcpc(t, guest, "eth0")
	checkVars(t, "masquerade", vars, map[string]string{"ip": "10.0.2.2", "mask": "24", "router": "10.0.2.1", "serverid": "10.0.2.1",
		"dns": "10.96.0.10", "search": "tenant.svc.cluster.local svc.cluster.local", "domain": "tenant.svc.cluster.local", "hostname": "web", "mtu": "1450"})

	serveTCP(t, guest, "0.0.0.0:8080")
	serveTCP(t, p.hostNS, "10.244.77.1:7070")
	if got, err := dialTCP(t, p.hostNS, ip+":8080"); err != nil || !strings.HasPrefix(got, "10.244.77.1:") {
		t.Errorf("host -> pod IP %s:8080: %q, %v; want the guest's answer", ip, got, err)
	}
	if got, err := dialTCP(t, guest, "10.244.77.1:7070"); err != nil || !strings.HasPrefix(got, ip+":") {
		t.Errorf("guest -> host: %q, %v; want the host to see the pod IP %s", got, err, ip)
	}

	// the agent restarts: its DHCP servers are gone, the NAT table too
	p.nets.Close()
	if err := masquerade.DeleteNAT(netnsPath); err != nil {
		t.Fatal(err)
	}
	p.nets = p.newNets()
	t.Cleanup(p.nets.Close)
	if err := p.nets.Check(vmi); err != nil {
		t.Fatalf("Check after a restart: %v", err)
	}
	if l := p.nets.DHCPServers(vmi.UID); l["k6t-eth0"].Address.String() != "10.0.2.2/24" {
		t.Errorf("DHCP servers after Check: %+v, want k6t-eth0 offering 10.0.2.2/24", l)
	}
	if got, err := dialTCP(t, p.hostNS, ip+":8080"); err != nil || !strings.HasPrefix(got, "10.244.77.1:") {
		t.Errorf("after Check, host -> pod IP %s:8080: %q, %v", ip, got, err)
	}
	if vars := udhcpc(t, guest, "eth0"); vars["ip"] != "10.0.2.2" {
		t.Errorf("after Check, udhcpc got %q", vars["ip"])
	}

	if err := p.nets.Teardown(vmi.Namespace, vmi.Name, vmi.UID); err != nil {
		t.Fatal(err)
	}
	if l := p.nets.DHCPServers(vmi.UID); len(l) != 0 {
		t.Errorf("DHCP servers after Teardown: %v", l)
	}
	if _, err := os.Stat(netnsPath); !os.IsNotExist(err) {
		t.Errorf("namespace %s still there (%v)", netnsPath, err)
	}
	if left, _ := filepath.Glob(filepath.Join(p.leases, "podnet", "10.*")); len(left) != 0 {
		t.Errorf("pod IP leases left: %v", left)
	}
}

// TestMasqueradePortsAndBridgeDHCP is a VMI with a masquerade interface
// declaring port 8080 and a bridge interface on a multus network: only
// 8080 of the pod IP reaches the guest; the bridge NIC gets the address
// host-local reserved for it by DHCP, with the network's gateway and its
// route as classless routes, from KubeVirt's 169.254.75.11.
func TestMasqueradePortsAndBridgeDHCP(t *testing.T) {
	p := newPodNet(t)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name, vmi.UID = "tenant", "db", types.UID(uuid.NewString())
	vmi.Spec.Hostname = "db0"
	q := resource.MustParse("64Mi")
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	vmi.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{
		{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}, Ports: []kubevirtv1.Port{{Port: 8080}}},
		{Name: "blue", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}},
	}
	vmi.Spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork(), {Name: "blue", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "blue-net"}}}}
	t.Cleanup(func() { _ = p.nets.Teardown(vmi.Namespace, vmi.Name, vmi.UID) })

	taps, err := p.nets.Setup(vmi)
	if err != nil {
		t.Fatal(err)
	}
	if len(taps) != 2 || taps["default"].Name != netattach.TapName(vmi.UID, 0) || taps["blue"].Name != netattach.TapName(vmi.UID, 1) {
		t.Fatalf("taps %v", taps)
	}
	ip := podIP(t, p.podAtt, vmi.UID)
	guest := newNetns(t, fmt.Sprintf("cvn-pb-%d", os.Getpid()%100000))
	guestNIC(t, p.hostNS, taps["default"].Name, guest, "eth0", domain.MAC(string(vmi.UID), "default"))
	guestNIC(t, p.hostNS, taps["blue"].Name, guest, "eth1", domain.MAC(string(vmi.UID), "blue"))
	if err := p.nets.Plumb(vmi); err != nil {
		t.Fatal(err)
	}
	checkVars(t, "masquerade", udhcpc(t, guest, "eth0"), map[string]string{"ip": "10.0.2.2", "router": "10.0.2.1", "hostname": "db0"})
	bridgeLease := p.nets.DHCPServers(vmi.UID)["k6t-net1"]
	if !strings.HasPrefix(bridgeLease.Address.String(), "10.99.8.") {
		t.Fatalf("bridge DHCP lease %+v, want host-local's 10.99.8.x", bridgeLease)
	}
	vars := udhcpc(t, guest, "eth1")
	checkVars(t, "bridge", vars, map[string]string{"ip": bridgeLease.Address.Addr().String(), "mask": "24", "router": "10.99.8.1", "serverid": "169.254.75.11",
		"staticroutes": "192.168.40.0/22 10.99.8.254 0.0.0.0/0 10.99.8.1", "hostname": "db0"})

	serveTCP(t, guest, "0.0.0.0:8080")
	serveTCP(t, guest, "0.0.0.0:9090")
	if got, err := dialTCP(t, p.hostNS, ip+":8080"); err != nil || !strings.HasPrefix(got, "10.244.77.1:") {
		t.Errorf("host -> pod IP %s:8080 (declared): %q, %v", ip, got, err)
	}
	if got, err := dialTCP(t, p.hostNS, ip+":9090"); err == nil {
		t.Errorf("host -> pod IP %s:9090 (not declared): %q, want refused", ip, got)
	}
	// the bridge NIC is on the multus network itself
	if got, err := dialTCP(t, p.hostNS, bridgeLease.Address.Addr().String()+":9090"); err != nil || !strings.HasPrefix(got, "10.99.8.1:") {
		t.Errorf("host -> bridge NIC %s:9090: %q, %v", bridgeLease.Address.Addr(), got, err)
	}
}
