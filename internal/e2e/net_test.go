package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/network/netattach"
)

// The CNI network of TestGuestsPingOverCNIBridge: a bridge plugin config
// as a NetworkAttachmentDefinition's spec.config would hold it, with the
// guests' addresses outside host-local's range (the busybox guest has no
// DHCP client, so it takes converge.ip= from its command line while
// host-local still reserves an address per attachment).
const (
	netNamespace = "converge-e2e"
	nadName      = "e2e-br"
	netBridge    = "br-e2e"
	netGateway   = "10.250.7.1"
	netMTU       = 1400
)

// netGuest is one VMI of the test.
type netGuest struct {
	name, uid, mac, ip, peer string
}

func (g netGuest) domain() string { return netNamespace + "_" + g.name }

// netVMIYAML is g as a VMI: the guest of hack/guest by direct kernel boot,
// 128 MiB, one bridge-bound interface with g.mac on the multus network
// nadName, kernel args giving it g.ip and its peer to ping.
func netVMIYAML(guestDir string, g netGuest, deleting bool) string {
	del := ""
	if deleting {
		del = "\n  deletionTimestamp: \"2026-01-01T00:00:00Z\""
	}
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: %s
  namespace: %s
  uid: %s%s
spec:
  terminationGracePeriodSeconds: 2
%s      interfaces:
      - name: e2e
        bridge: {}
        macAddress: %s
  networks:
  - name: e2e
    multus:
      networkName: %s
`, g.name, netNamespace, g.uid, del,
		guestDomainYAML(2, fmt.Sprintf("converge.hostname=%s converge.ip=%s/24 converge.ping=%s", g.name, g.ip, g.peer), guestDir), g.mac, nadName)
}

// netConf is the bridge plugin configuration of the NAD: bridge br-e2e
// with the gateway address (in the test's namespace: isGateway turns on
// forwarding there only), MTU 1400, macspoofchk (nft rules letting each
// port send from its attachment's MAC only), the MAC capability (libcni
// passes the NIC's MAC as runtimeConfig, as multus does) and host-local
// IPAM on a /24 storing its reservations in ipamDir.
func netConf(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "type": "bridge",
  "bridge": %q,
  "isGateway": true,
  "ipMasq": false,
  "mtu": %d,
  "macspoofchk": true,
  "capabilities": {"mac": true},
  "ipam": {
    "type": "host-local",
    "ranges": [[{"subnet": "10.250.7.0/24", "rangeStart": "10.250.7.100", "rangeEnd": "10.250.7.199", "gateway": %q}]],
    "dataDir": %q
  }
}
`, nadName, netBridge, netMTU, netGateway, ipamDir)
}

// TestGuestsPingOverCNIBridge boots two Debian guests through the real
// `converge-node vm` binary with one NIC each on a CNI bridge network (a
// NetworkAttachmentDefinition config of type bridge, from --cni-conf-dir),
// KubeVirt's bridge binding: CNI ADD into the VMI's namespace cvm-<uid8>,
// the VM's tap bridged to the CNI interface there. libvirtd runs in a
// network namespace the test creates, and the agent runs in the root
// namespace with --cni-host-netns naming libvirtd's, which is what
// netattach expects: the bridge plugin runs there (br-e2e and the host
// veths are created there) and the taps libvirt creates are found there.
// It checks:
//   - both guests come up Running and Ready and print their NIC with the
//     MAC the VMI fixed (as the MAC pool assigns it);
//   - each guest pings the other (CONVERGE-GUEST-PING-OK), across the two
//     in-namespace bridges, the veths and br-e2e, with macspoofchk on;
//   - on br-e2e's side both MACs are in the bridge's forwarding database,
//     and after pinging each guest from the gateway address in its
//     neighbour table; the nft rules of macspoofchk name both MACs;
//   - a new agent given both VMIs as deleted shuts the domains down,
//     reports them removed, and nothing is left: no domain, no cvm-*
//     namespace, no tap or veth on br-e2e, no host-local reservation, no
//     nft rule naming the MACs.
//
// Latencies (VMI served -> Ready, -> NIC up, -> PING-OK) are logged, not
// asserted.
func TestGuestsPingOverCNIBridge(t *testing.T) {
	l := vmtest.StartLibvirt(t)
	vmtest.Require(t, l.Netns != "", "a libvirtd already answered on %s outside a test network namespace: the CNI test needs its own (stop the running libvirtd)", l.URI)
	for _, tool := range []struct{ bin, pkg string }{{"ping", "iputils-ping"}, {"nft", "nftables"}, {"bridge", "iproute2"}} {
		_, err := exec.LookPath(tool.bin)
		vmtest.Require(t, err == nil, "%s not found: apt-get install -y --no-install-recommends %s", tool.bin, tool.pkg)
	}
	cniBin := filepath.Join(vmtest.RepoRoot(t), "bin", "cni")
	for _, p := range []string{"bridge", "host-local"} {
		_, err := os.Stat(filepath.Join(cniBin, p))
		vmtest.Require(t, err == nil, "CNI plugin %s missing in %s: run make cni", p, cniBin)
	}
	guestDir := vmtest.BuildGuest(t)
	bin := vmtest.BuildBinary(t, "./cmd/converge-node")
	hostNS := netattach.NetnsPath(l.Netns)

	guests := []netGuest{
		{name: "net-a", uid: "e2e0a000-0000-4000-8000-00000000000a", mac: "02:00:00:e2:00:0a", ip: "10.250.7.11", peer: "10.250.7.12"},
		{name: "net-b", uid: "e2e0b000-0000-4000-8000-00000000000b", mac: "02:00:00:e2:00:0b", ip: "10.250.7.12", peer: "10.250.7.11"},
	}
	for _, g := range guests {
		netnsName := netattach.NetnsName(types.UID(g.uid))
		_ = netattach.DeleteNetns(netnsName) // a leftover of a killed run
		t.Cleanup(func() {
			if err := netattach.DeleteNetns(netnsName); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	for _, g := range guests {
		l.RemoveDomain(t, g.domain())
		t.Cleanup(func() { l.RemoveDomain(t, g.domain()) })
	}

	dir := t.TempDir()
	stateDir, confDir, ipamDir := filepath.Join(dir, "state"), filepath.Join(dir, "nad"), filepath.Join(dir, "ipam")
	writeFile(t, filepath.Join(confDir, netNamespace, nadName+".conf"), netConf(ipamDir))
	live, deleting := filepath.Join(dir, "vmis.yaml"), filepath.Join(dir, "vmis-deleting.yaml")
	for path, del := range map[string]bool{live: false, deleting: true} {
		var docs []string
		for _, g := range guests {
			docs = append(docs, netVMIYAML(guestDir, g, del))
		}
		writeFile(t, path, strings.Join(docs, "---\n"))
	}
	cniFlags := []string{"--cni-bin-dir", cniBin, "--cni-conf-dir", confDir, "--cni-host-netns", hostNS}

	start := time.Now()
	agent := startAgentArgs(t, bin, live, stateDir, l, cniFlags...)
	var want []string
	for _, g := range guests {
		want = append(want, netNamespace+"/"+g.name+" Running ready=True")
	}
	agent.awaitAll(t, want, 120*time.Second)
	ready := time.Since(start)

	// the guests' own view, from the serial logs virtlogd writes: every
	// marker of both guests polled together, so each time is when it
	// showed
	type marker struct{ guest, serial, text string }
	var markers []marker
	for _, g := range guests {
		serial := filepath.Join(stateDir, "serial", g.domain()+"-serial.log")
		markers = append(markers,
			marker{g.name, serial, fmt.Sprintf("CONVERGE-GUEST-NET %s mac=%s ip=%s/24", g.name, g.mac, g.ip)},
			marker{g.name, serial, "CONVERGE-GUEST-PING-OK " + g.peer})
	}
	seenAt := map[marker]time.Duration{}
	guard := time.Now().Add(150 * time.Second)
	for len(seenAt) < len(markers) {
		for _, m := range markers {
			if _, ok := seenAt[m]; !ok && logHas(m.serial, m.text) {
				seenAt[m] = time.Since(start)
			}
			if logHas(m.serial, "CONVERGE-GUEST-ERROR") {
				t.Fatalf("%s: the guest reports an error; serial log:\n%s", m.guest, tailFile(m.serial))
			}
		}
		if time.Now().After(guard) {
			for _, m := range markers {
				if _, ok := seenAt[m]; !ok {
					t.Errorf("%s: no %q in %s within 150 s; serial log:\n%s", m.guest, m.text, m.serial, tailFile(m.serial))
				}
			}
			t.FailNow()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("latency: VMI served -> both Running/Ready %s", ready.Round(time.Millisecond))
	for _, m := range markers {
		t.Logf("latency %s: VMI served -> %q on the console %s", m.guest, m.text, seenAt[m].Round(time.Millisecond))
	}

	// br-e2e's side, in libvirtd's namespace
	fdb := mustRun(t, "bridge", "-n", l.Netns, "fdb", "show", "br", netBridge)
	for _, g := range guests {
		if !strings.Contains(fdb, g.mac) {
			t.Errorf("bridge fdb of %s in %s: no entry for %s's MAC %s:\n%s", netBridge, l.Netns, g.name, g.mac, fdb)
		}
		mustRun(t, "ip", "netns", "exec", l.Netns, "ping", "-c", "1", "-W", "5", g.ip)
	}
	neigh := mustRun(t, "ip", "-n", l.Netns, "neigh", "show", "dev", netBridge)
	for _, g := range guests {
		if !hasNeighbour(neigh, g.ip, g.mac) {
			t.Errorf("neighbour table of %s in %s: want %s lladdr %s:\n%s", netBridge, l.Netns, g.ip, g.mac, neigh)
		}
	}
	rules := mustRun(t, "ip", "netns", "exec", l.Netns, "nft", "list", "ruleset")
	for _, g := range guests {
		if !strings.Contains(rules, g.mac) {
			t.Errorf("nft ruleset in %s: no macspoofchk rule for %s's MAC %s:\n%s", l.Netns, g.name, g.mac, rules)
		}
	}
	ports := mustRun(t, "ip", "-n", l.Netns, "-o", "link", "show", "master", netBridge)
	t.Logf("ports of %s: %d (the two veths)", netBridge, strings.Count(ports, "\n"))
	if n := len(ipamReservations(t, ipamDir)); n != len(guests) {
		t.Errorf("host-local reservations in %s: %d, want %d (one per attachment)", ipamDir, n, len(guests))
	}

	// deletion: the agent stops (domains keep running), a new one is given
	// both VMIs as deleted and tears everything down from its state
	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v; log:\n%s", err, tailFile(agent.stderr))
	}
	delStart := time.Now()
	agent = startAgentArgs(t, bin, deleting, stateDir, l, cniFlags...)
	want = want[:0]
	for _, g := range guests {
		want = append(want, netNamespace+"/"+g.name+" removed")
	}
	agent.awaitAll(t, want, 90*time.Second)
	t.Logf("latency: VMIs deleted -> both removed (grace 2 s, destroy, undefine, CNI DEL, netns removed) %s", time.Since(delStart).Round(time.Millisecond))
	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v", err)
	}

	if doms := l.Domains(t); len(doms) != 0 {
		t.Errorf("virsh list --all on the test's libvirtd: %q, want nothing", doms)
	}
	for _, g := range guests {
		if _, err := os.Stat(netattach.NetnsPath(netattach.NetnsName(types.UID(g.uid)))); !os.IsNotExist(err) {
			t.Errorf("%s: network namespace %s still there (stat: %v)", g.name, netattach.NetnsName(types.UID(g.uid)), err)
		}
	}
	if ports := mustRun(t, "ip", "-n", l.Netns, "-o", "link", "show", "master", netBridge); strings.TrimSpace(ports) != "" {
		t.Errorf("ports left on %s in %s:\n%s", netBridge, l.Netns, ports)
	}
	if links := mustRun(t, "ip", "-n", l.Netns, "-o", "link", "show"); strings.Contains(links, "cvt") {
		t.Errorf("taps (cvt*) left in %s:\n%s", l.Netns, links)
	}
	if left := ipamReservations(t, ipamDir); len(left) != 0 {
		t.Errorf("host-local reservations left in %s: %q", ipamDir, left)
	}
	rules = mustRun(t, "ip", "netns", "exec", l.Netns, "nft", "list", "ruleset")
	for _, g := range guests {
		if strings.Contains(rules, g.mac) {
			t.Errorf("nft ruleset in %s still names %s's MAC %s:\n%s", l.Netns, g.name, g.mac, rules)
		}
	}
}
