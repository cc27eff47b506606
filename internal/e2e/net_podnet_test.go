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

// The pod network of TestGuestOnDefaultPodNetwork: a runtime's conflist
// (bridge with the gateway address on the host side, host-local leases
// in the test's directory), as internal/testing/cluster writes the
// cluster's.
const (
	podNetName    = "e2e-podnet"
	podNetBridge  = "br-pod-e2e"
	podNetGateway = "10.250.9.1"
	podVMI        = "podnet"
	podVMIUID     = "e2e0c000-0000-4000-8000-00000000000c"
)

func podNetConflist(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.250.9.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`, podNetName, podNetBridge, ipamDir)
}

// podVMIYAML is a VMI declaring no interface (KubeVirt's default: the
// pod network with masquerade), booting the test guest with DHCP on its
// NICs and pinging the pod network's gateway.
func podVMIYAML(guestDir string, deleting bool) string {
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
%s`, podVMI, netNamespace, podVMIUID, del,
		guestDomainYAML(2, "converge.hostname="+podVMI+" converge.dhcp=1 converge.ping="+podNetGateway, guestDir))
}

// TestGuestOnDefaultPodNetwork boots the test guest from a VMI that
// declares no interface through the real `converge-node vm`, on a node
// whose pod network is a runtime's CNI conflist (--pod-network-conf-dir,
// the bridge and host-local plugins of bin/cni, run in libvirtd's
// namespace as in TestGuestsPingOverCNIBridge). It checks:
//   - the VMI runs Running and Ready with KubeVirt's default interface:
//     CNI ADD of the pod network as eth0 of the VMI's namespace, the
//     VM's tap behind the masquerade bridge;
//   - the guest's DHCP client gets 10.0.2.2/24 with router 10.0.2.1 from
//     the agent (CONVERGE-GUEST-DHCP podnet ip=10.0.2.2/24 router=10.0.2.1);
//   - the guest reaches the pod network's gateway (CONVERGE-GUEST-PING-OK,
//     masqueraded behind the pod IP);
//   - the host reaches the guest through the pod IP: its echo requests
//     are forwarded to the guest (every port and protocol, no ports being
//     declared), whose replies come back one hop further (TTL 63) than the
//     namespace's own would (64);
//   - a new agent given the VMI as deleted removes it and nothing is left:
//     no domain, no namespace, no pod IP lease.
func TestGuestOnDefaultPodNetwork(t *testing.T) {
	l := vmtest.StartLibvirt(t)
	vmtest.Require(t, l.Netns != "", "a libvirtd already answered on %s outside a test network namespace: the CNI test needs its own (stop the running libvirtd)", l.URI)
	_, err := exec.LookPath("ping")
	vmtest.Require(t, err == nil, "ping not found: apt-get install -y --no-install-recommends iputils-ping")
	cniBin := filepath.Join(vmtest.RepoRoot(t), "bin", "cni")
	for _, p := range []string{"bridge", "host-local"} {
		_, err := os.Stat(filepath.Join(cniBin, p))
		vmtest.Require(t, err == nil, "CNI plugin %s missing in %s: run make cni", p, cniBin)
	}
	guestDir := vmtest.BuildGuest(t)
	requireDHCPGuest(t, guestDir)
	bin := vmtest.BuildBinary(t, "./cmd/converge-node")
	hostNS := netattach.NetnsPath(l.Netns)
	netnsName := netattach.NetnsName(types.UID(podVMIUID))
	_ = netattach.DeleteNetns(netnsName) // a leftover of a killed run
	t.Cleanup(func() {
		if err := netattach.DeleteNetns(netnsName); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	dom := netNamespace + "_" + podVMI
	l.RemoveDomain(t, dom)
	t.Cleanup(func() { l.RemoveDomain(t, dom) })

	dir := t.TempDir()
	stateDir, confDir, ipamDir, resolv := filepath.Join(dir, "state"), filepath.Join(dir, "net.d"), filepath.Join(dir, "ipam"), filepath.Join(dir, "resolv.conf")
	writeFile(t, filepath.Join(confDir, "10-"+podNetName+".conflist"), podNetConflist(ipamDir))
	writeFile(t, resolv, "search "+netNamespace+".svc.cluster.local svc.cluster.local\nnameserver 10.250.9.53\n")
	live, deleting := filepath.Join(dir, "vmi.yaml"), filepath.Join(dir, "vmi-deleting.yaml")
	writeFile(t, live, podVMIYAML(guestDir, false))
	writeFile(t, deleting, podVMIYAML(guestDir, true))
	flags := []string{"--cni-bin-dir", cniBin, "--cni-host-netns", hostNS,
		"--pod-network-conf-dir", confDir, "--pod-network-bin-dir", cniBin, "--pod-network-resolv-conf", resolv}

	start := time.Now()
	agent := startAgentArgs(t, bin, live, stateDir, l, flags...)
	agent.awaitAll(t, []string{netNamespace + "/" + podVMI + " Running ready=True"}, 120*time.Second)
	ready := time.Since(start)
	serial := filepath.Join(stateDir, "serial", dom+"-serial.log")
	markers := []string{"CONVERGE-GUEST-DHCP " + podVMI + " ip=10.0.2.2/24 router=10.0.2.1", "CONVERGE-GUEST-PING-OK " + podNetGateway}
	seenAt := map[string]time.Duration{}
	for guard := time.Now().Add(150 * time.Second); len(seenAt) < len(markers); time.Sleep(100 * time.Millisecond) {
		for _, m := range markers {
			if _, ok := seenAt[m]; !ok && logHas(serial, m) {
				seenAt[m] = time.Since(start)
			}
		}
		if logHas(serial, "CONVERGE-GUEST-ERROR") {
			t.Fatalf("the guest reports an error; serial log:\n%s", tailFile(serial))
		}
		if time.Now().After(guard) {
			t.Fatalf("no %q in %s within 150 s (seen: %v); serial log:\n%s\nagent log:\n%s", markers, serial, seenAt, tailFile(serial), tailFile(agent.stderr))
		}
	}
	t.Logf("latency: VMI served -> Running/Ready %s", ready.Round(time.Millisecond))
	for _, m := range markers {
		t.Logf("latency: VMI served -> %q on the console %s", m, seenAt[m].Round(time.Millisecond))
	}

	// the pod IP: the VMI's namespace's eth0, reserved by host-local
	leases := ipamReservations(t, ipamDir)
	if len(leases) != 1 {
		t.Fatalf("host-local reservations %q, want the VMI's pod IP", leases)
	}
	podIP := leases[0]
	if out := mustRun(t, "ip", "-n", netnsName, "-4", "-o", "addr", "show", "dev", "eth0"); !strings.Contains(out, " "+podIP+"/24 ") {
		t.Errorf("eth0 of %s: %s; want the pod IP %s", netnsName, out, podIP)
	}
	ping := mustRun(t, "ip", "netns", "exec", l.Netns, "ping", "-c", "3", "-i", "0.5", "-W", "5", podIP)
	if !strings.Contains(ping, "ttl=63") || strings.Contains(ping, "ttl=64") {
		t.Errorf("ping of the pod IP %s from the host: want the guest's replies (ttl=63, forwarded once by the VMI's namespace):\n%s", podIP, ping)
	}

	// deletion, by a new agent
	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v; log:\n%s", err, tailFile(agent.stderr))
	}
	agent = startAgentArgs(t, bin, deleting, stateDir, l, flags...)
	agent.awaitAll(t, []string{netNamespace + "/" + podVMI + " removed"}, 90*time.Second)
	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v", err)
	}
	if doms := l.Domains(t); len(doms) != 0 {
		t.Errorf("virsh list --all on the test's libvirtd: %q, want nothing", doms)
	}
	if _, err := os.Stat(netattach.NetnsPath(netnsName)); !os.IsNotExist(err) {
		t.Errorf("network namespace %s still there (stat: %v)", netnsName, err)
	}
	if left := ipamReservations(t, ipamDir); len(left) != 0 {
		t.Errorf("pod IP leases left in %s: %q", ipamDir, left)
	}
}

const (
	bridgedVMI    = "bridged"
	bridgedVMIUID = "e2e0d000-0000-4000-8000-00000000000d"
)

// bridgedVMIYAML is a VMI with a masquerade interface declaring port 22
// on the pod network and a bridge interface on the multus network
// nadName, booting the test guest with DHCP on both NICs.
func bridgedVMIYAML(guestDir string, deleting bool) string {
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
      - name: default
        masquerade: {}
        ports:
        - name: ssh
          port: 22
      - name: e2e
        bridge: {}
  networks:
  - name: default
    pod: {}
  - name: e2e
    multus:
      networkName: %s
`, bridgedVMI, netNamespace, bridgedVMIUID, del,
		guestDomainYAML(2, "converge.hostname="+bridgedVMI+" converge.dhcp=1 converge.ping="+netGateway, guestDir), nadName)
}

// TestGuestBridgeDHCPAndMasqueradePorts boots the test guest with a
// masquerade NIC declaring one port and a bridge NIC on a CNI bridge
// network (the NetworkAttachmentDefinition of TestGuestsPingOverCNIBridge):
//   - the guest's DHCP client gets 10.0.2.2/24 via 10.0.2.1 on the first
//     NIC, and on the second the address host-local reserved for it, with
//     the network's gateway, served as KubeVirt's bridge binding serves it;
//   - the guest pings the bridge network's gateway from that address;
//   - echo requests to the pod IP are not forwarded (only port 22 is):
//     the VMI's namespace answers them itself (TTL 64);
//   - deletion leaves no namespace and no lease on either network.
func TestGuestBridgeDHCPAndMasqueradePorts(t *testing.T) {
	l := vmtest.StartLibvirt(t)
	vmtest.Require(t, l.Netns != "", "a libvirtd already answered on %s outside a test network namespace: the CNI test needs its own (stop the running libvirtd)", l.URI)
	for _, tool := range []struct{ bin, pkg string }{{"ping", "iputils-ping"}, {"nft", "nftables"}} {
		_, err := exec.LookPath(tool.bin)
		vmtest.Require(t, err == nil, "%s not found: apt-get install -y --no-install-recommends %s", tool.bin, tool.pkg)
	}
	cniBin := filepath.Join(vmtest.RepoRoot(t), "bin", "cni")
	for _, p := range []string{"bridge", "host-local"} {
		_, err := os.Stat(filepath.Join(cniBin, p))
		vmtest.Require(t, err == nil, "CNI plugin %s missing in %s: run make cni", p, cniBin)
	}
	guestDir := vmtest.BuildGuest(t)
	requireDHCPGuest(t, guestDir)
	bin := vmtest.BuildBinary(t, "./cmd/converge-node")
	hostNS := netattach.NetnsPath(l.Netns)
	netnsName := netattach.NetnsName(types.UID(bridgedVMIUID))
	_ = netattach.DeleteNetns(netnsName)
	t.Cleanup(func() {
		if err := netattach.DeleteNetns(netnsName); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	dom := netNamespace + "_" + bridgedVMI
	l.RemoveDomain(t, dom)
	t.Cleanup(func() { l.RemoveDomain(t, dom) })

	dir := t.TempDir()
	stateDir, podConf, nadConf := filepath.Join(dir, "state"), filepath.Join(dir, "net.d"), filepath.Join(dir, "nad")
	podIPAM, nadIPAM, resolv := filepath.Join(dir, "ipam-pod"), filepath.Join(dir, "ipam-nad"), filepath.Join(dir, "resolv.conf")
	writeFile(t, filepath.Join(podConf, "10-"+podNetName+".conflist"), podNetConflist(podIPAM))
	writeFile(t, filepath.Join(nadConf, netNamespace, nadName+".conf"), netConf(nadIPAM))
	writeFile(t, resolv, "nameserver 10.250.9.53\n")
	live, deleting := filepath.Join(dir, "vmi.yaml"), filepath.Join(dir, "vmi-deleting.yaml")
	writeFile(t, live, bridgedVMIYAML(guestDir, false))
	writeFile(t, deleting, bridgedVMIYAML(guestDir, true))
	flags := []string{"--cni-bin-dir", cniBin, "--cni-conf-dir", nadConf, "--cni-host-netns", hostNS,
		"--pod-network-conf-dir", podConf, "--pod-network-bin-dir", cniBin, "--pod-network-resolv-conf", resolv}

	start := time.Now()
	agent := startAgentArgs(t, bin, live, stateDir, l, flags...)
	agent.awaitAll(t, []string{netNamespace + "/" + bridgedVMI + " Running ready=True"}, 120*time.Second)
	reserved := ipamReservations(t, nadIPAM)
	if len(reserved) != 1 {
		t.Fatalf("host-local reservations on %s: %q, want one", nadName, reserved)
	}
	serial := filepath.Join(stateDir, "serial", dom+"-serial.log")
	markers := []string{
		"CONVERGE-GUEST-DHCP " + bridgedVMI + " ip=10.0.2.2/24 router=10.0.2.1",
		"CONVERGE-GUEST-DHCP " + bridgedVMI + " ip=" + reserved[0] + "/24 router=" + netGateway,
		"CONVERGE-GUEST-PING-OK " + netGateway,
	}
	seenAt := map[string]time.Duration{}
	for guard := time.Now().Add(150 * time.Second); len(seenAt) < len(markers); time.Sleep(100 * time.Millisecond) {
		for _, m := range markers {
			if _, ok := seenAt[m]; !ok && logHas(serial, m) {
				seenAt[m] = time.Since(start)
			}
		}
		if logHas(serial, "CONVERGE-GUEST-ERROR") {
			t.Fatalf("the guest reports an error; serial log:\n%s", tailFile(serial))
		}
		if time.Now().After(guard) {
			t.Fatalf("no %q in %s within 150 s (seen: %v); serial log:\n%s\nagent log:\n%s", markers, serial, seenAt, tailFile(serial), tailFile(agent.stderr))
		}
	}
	for _, m := range markers {
		t.Logf("latency: VMI served -> %q on the console %s", m, seenAt[m].Round(time.Millisecond))
	}
	leases := ipamReservations(t, podIPAM)
	if len(leases) != 1 {
		t.Fatalf("pod network reservations %q, want one", leases)
	}
	ping := mustRun(t, "ip", "netns", "exec", l.Netns, "ping", "-c", "2", "-i", "0.5", "-W", "5", leases[0])
	if !strings.Contains(ping, "ttl=64") || strings.Contains(ping, "ttl=63") {
		t.Errorf("ping of the pod IP %s with only port 22 forwarded: want the namespace's own replies (ttl=64):\n%s", leases[0], ping)
	}

	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v; log:\n%s", err, tailFile(agent.stderr))
	}
	agent = startAgentArgs(t, bin, deleting, stateDir, l, flags...)
	agent.awaitAll(t, []string{netNamespace + "/" + bridgedVMI + " removed"}, 90*time.Second)
	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v", err)
	}
	if _, err := os.Stat(netattach.NetnsPath(netnsName)); !os.IsNotExist(err) {
		t.Errorf("network namespace %s still there (stat: %v)", netnsName, err)
	}
	for _, d := range []string{podIPAM, nadIPAM} {
		if left := ipamReservations(t, d); len(left) != 0 {
			t.Errorf("leases left in %s: %q", d, left)
		}
	}
}

// requireDHCPGuest skips, even in CI, when the test guest has no DHCP
// client (converge.dhcp=1, /etc/udhcpc.sh: hack/guest's builder 3): a
// branch without it cannot run these tests, and failing them would say
// nothing about the agent.
func requireDHCPGuest(t *testing.T, guestDir string) {
	t.Helper()
	if !logHas(filepath.Join(guestDir, "stamp"), "udhcpc.sh=") {
		t.Skipf("the test guest in %s has no DHCP client (converge.dhcp=1): this hack/guest predates it", guestDir)
	}
}
