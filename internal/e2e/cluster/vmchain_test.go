package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/gitserver"
	"github.com/converge-dev/converge/internal/testing/guestimage"
	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/network/netattach"
)

// What the VM chain (then_chain_vm_test.go) commits and where it looks on
// the node.
const (
	chainNS     = "vm-chain"
	chainNAD    = "chain-bridge"
	chainBridge = "chainbr0" // the NAD's Linux bridge on the node
	// bridgeResource is the node resource bridge-marker advertises for
	// it (kubevirt/bridge-marker: bridge.network.kubevirt.io/<bridge>).
	bridgeResource = "bridge.network.kubevirt.io/" + chainBridge
	chainSubnet    = "192.168.177.0/24" // the NAD's host-local range
	chainNetFile   = configPath + "/vm-chain-network.yaml"
	// chainMemory is the VM's memory, chainMemoryAfter the memory of the
	// commit that changes it.
	chainMemory, chainMemoryAfter = "128Mi", "160Mi"
	chainMemoryAfterKiB           = 160 * 1024
	// podGuestCIDR and podGateway are what the guest gets by DHCP on the
	// pod network with KubeVirt's masquerade binding: the guest address
	// and the gateway of the default vmNetworkCIDR 10.0.2.0/24 (KubeVirt
	// pkg/network/link: GetMasqueradeVmIp, GetMasqueradeGwIp).
	podGuestCIDR, podGateway = "10.0.2.2/24", "10.0.2.1"
	// agentStateDir is the VM agent's state directory on the node
	// (components/virt VMAgentStateDir): serial/<namespace>_<name>-serial.log,
	// vmis/<namespace>_<name>_<uid>/ (a VMI's own disks:
	// nodeplane/vm/vmdisks), containerdisks/ (the image cache).
	agentStateDir = "/var/lib/converge/vm"
	agentSelector = "k8s-app=converge-vm-agent"
)

// chainNetworkYAML is the chain's Namespace and its
// NetworkAttachmentDefinition: a Linux bridge with host-local addresses.
func chainNetworkYAML() string {
	return fmt.Sprintf(`# The namespace of the VM chain test and its bridge network.
apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  config: '{"cniVersion": "0.3.1", "name": "%[2]s", "type": "bridge", "bridge": "%[3]s", "ipam": {"type": "host-local", "subnet": "%[4]s"}}'
`, chainNS, chainNAD, chainBridge, chainSubnet)
}

// hcVersions are the example's HyperConverged file with and without the
// pod network annotations.
type hcVersions struct{ with, without string }

// podNetworkHC gives the repository's HyperConverged with the
// annotations naming the local cluster's CNI directories
// (internal/testing/cluster: <work dir>/cni/net.d, bin/cni,
// <work dir>/cni/ipam), and as it is.
func podNetworkHC(t *testing.T, repo *gitserver.Repo, e *cluster.Env) hcVersions {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo.Dir, hcFile))
	if err != nil {
		t.Fatal(err)
	}
	with, err := e.WithPodNetwork(string(b), hcNamespace)
	if err != nil {
		t.Fatalf("%s: %v", hcFile, err)
	}
	return hcVersions{with: with, without: string(b)}
}

// chainCase is one VM of the chain: how its root disk comes to the node.
type chainCase struct {
	// name names the subtest.
	name string
	// vm is the VirtualMachine's name.
	vm string
	// dataVolume is the name of the DataVolume of the VM's
	// dataVolumeTemplates, "" when the root disk is a containerDisk.
	dataVolume string
	// diskURL is the HTTP source of the DataVolume; image the
	// containerDisk's image reference.
	diskURL, image string
}

// file is the VM's file in the config repository.
func (c chainCase) file() string { return configPath + "/vm-chain-" + c.vm + ".yaml" }

// domain is the libvirt domain name of the VM's VMI (nodeplane/vm/domain
// Name: <namespace>_<name>).
func (c chainCase) domain() string { return chainNS + "_" + c.vm }

// serialLog is the VMI's serial console log on the node.
func (c chainCase) serialLog() string {
	return filepath.Join(agentStateDir, "serial", c.domain()+"-serial.log")
}

// userData is the VM's cloud-init user data: the guest prints each of its
// lines (hack/guest init.sh), marker among them.
func userData(marker string) string {
	return "#cloud-config\nruncmd:\n  - echo " + marker + "\n"
}

// markerLine is the console line of the user data's marker line.
func markerLine(marker string) string {
	return guestimage.MarkerUserData + "   - echo " + marker
}

// vmYAML is the VirtualMachine as a KubeVirt user writes it: runStrategy
// Always, the root disk (a dataVolumeTemplates DataVolume imported over
// HTTP, or a containerDisk), a cloudInitNoCloud disk with the user data,
// the default pod network with masquerade and the chain's bridge network,
// memory given.
func (c chainCase) vmYAML(memory, marker string) string {
	var templates, root string
	if c.dataVolume != "" {
		templates = fmt.Sprintf(`  dataVolumeTemplates:
    - metadata:
        name: %s
      spec:
        source:
          http:
            url: %s
        storage:
          accessModes: [ReadWriteOnce]
          storageClassName: %s
          resources:
            requests:
              storage: 64Mi
`, c.dataVolume, c.diskURL, storageClass)
		root = "          dataVolume:\n            name: " + c.dataVolume + "\n"
	} else {
		root = "          containerDisk:\n            image: " + c.image + "\n"
	}
	ud := strings.ReplaceAll(strings.TrimRight(userData(marker), "\n"), "\n", "\n              ")
	return fmt.Sprintf(`# A VM of the VM chain test (internal/e2e/cluster).
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: %s
  namespace: %s
spec:
  runStrategy: Always
%s  template:
    metadata:
      labels:
        app: vm-chain
    spec:
      terminationGracePeriodSeconds: 2
      domain:
        cpu:
          cores: 1
        memory:
          guest: %s
        devices:
          disks:
            - name: rootdisk
              disk:
                bus: virtio
            - name: cloudinitdisk
              disk:
                bus: virtio
          interfaces:
            - name: default
              masquerade: {}
            - name: bridge
              bridge: {}
      networks:
        - name: default
          pod: {}
        - name: bridge
          multus:
            networkName: %s
      volumes:
        - name: rootdisk
%s        - name: cloudinitdisk
          cloudInitNoCloud:
            userData: |
              %s
`, c.vm, chainNS, templates, memory, chainNAD, root, ud)
}

// vmTest is where a VM test on the real cluster starts.
type vmTest struct {
	e        *cluster.Env
	repo     *gitserver.Repo
	ctx      context.Context // the test's, ended at its end
	guestDir string          // hack/guest's build (vmtest.BuildGuest)
	vc       client.Client   // of vmScheme and the test's addToScheme
}

// startVMTest gives a VM test its start: the example's Sync (syncExample)
// Ready within timeout, also the test's context's timeout, the guest
// built, a client of vmScheme with addToScheme added.
func startVMTest(t *testing.T, timeout time.Duration, addToScheme ...func(*runtime.Scheme) error) vmTest {
	t.Helper()
	e, repo, _, _ := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	waitSyncReady(t, ctx, e)
	guestDir := vmtest.BuildGuest(t)
	scheme := vmScheme(t)
	for _, add := range addToScheme {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	vc, err := client.New(e.Cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return vmTest{e: e, repo: repo, ctx: ctx, guestDir: guestDir, vc: vc}
}

// vmScheme knows client-go's types, KubeVirt's and CDI's.
func vmScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme, cdiv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// step is one step of the chain: it polls cond until it holds and fails
// the test naming the step and what it saw last.
type step struct {
	t *testing.T
	// prefix names the steps' sequence in messages ("" or "cleanup ").
	prefix string
	n      int
	// stopped, set by stop during a cond, fails the step at once.
	stopped string
}

// do runs step what (numbered) and fails t, with the step's number and
// name and cond's last word, when cond does not hold within timeout, or
// at once when cond called stop.
func (s *step) do(what string, timeout time.Duration, cond func() (bool, string)) {
	s.t.Helper()
	s.n++
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		ok, last := cond()
		if s.stopped != "" {
			s.t.Fatalf("%sstep %d, %s: %s", s.prefix, s.n, what, s.stopped)
		}
		if ok {
			s.t.Logf("%sstep %d, %s: done in %s", s.prefix, s.n, what, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%sstep %d, %s: not within %s; last seen: %s", s.prefix, s.n, what, timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stop makes the running step fail at once with msg: what it waits for
// will not come (a refused commit, a failed import).
func (s *step) stop(format string, args ...any) { s.stopped = fmt.Sprintf(format, args...) }

// refusedReasons are the Sync Ready reasons of a revision converge did
// not apply (rendering, verification, apply or prune failed). A health
// check failure is not one: the revision was applied, and the steps
// after it say what is unhealthy.
var refusedReasons = map[string]bool{
	v1alpha1.RenderFailedReason: true, v1alpha1.ApplyFailedReason: true, v1alpha1.PruneFailedReason: true,
	v1alpha1.VerificationFailedReason: true,
}

// syncTook reports whether the Sync attempted revision sha and applied
// it: Ready True, or waiting for health (or failing it) at it. A refusal
// stops the step with the Sync's message.
func syncTook(st *step, ctx context.Context, e *cluster.Env, sha string) func() (bool, string) {
	return func() (bool, string) {
		s, err := getSync(ctx, e)
		if err != nil {
			return false, err.Error()
		}
		rev := "main@sha1:" + sha
		ready := apimeta.FindStatusCondition(s.Status.Conditions, "Ready")
		if s.Status.LastAttemptedRevision != rev || ready == nil {
			return false, fmt.Sprintf("Sync attempted %q, want %q; Ready %+v", s.Status.LastAttemptedRevision, rev, ready)
		}
		if ready.Status == metav1.ConditionFalse && refusedReasons[ready.Reason] {
			st.stop("the Sync refused commit %s: Ready=False %s: %s", sha, ready.Reason, ready.Message)
		}
		return ready.Status == metav1.ConditionTrue || ready.Reason == v1alpha1.WaitingForHealthReason || ready.Reason == v1alpha1.HealthCheckFailedReason,
			fmt.Sprintf("Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
	}
}

// syncApplied reports whether the Sync applied revision sha (with wait:
// every component, the workloads included, healthy).
func syncApplied(ctx context.Context, e *cluster.Env, sha string) func() (bool, string) {
	return func() (bool, string) {
		s, err := getSync(ctx, e)
		if err != nil {
			return false, err.Error()
		}
		if s.Status.LastAppliedRevision == "main@sha1:"+sha {
			return true, ""
		}
		ready := apimeta.FindStatusCondition(s.Status.Conditions, "Ready")
		var comps []string
		for _, c := range s.Status.Components {
			if c.Health != "Healthy" {
				comps = append(comps, fmt.Sprintf("%s %s (%s)", c.Name, c.Health, c.Message))
			}
		}
		return false, fmt.Sprintf("applied %q, attempted %q, Ready %+v, components not healthy: %v",
			s.Status.LastAppliedRevision, s.Status.LastAttemptedRevision, ready, comps)
	}
}

// commit commits files to the config repository and asks the Sync to
// reconcile now (the request annotation `converge reconcile` sets,
// without waiting for the result: the steps after it say what became of
// the commit); it gives the commit.
func commit(t *testing.T, ctx context.Context, e *cluster.Env, repo *gitserver.Repo, msg string, files map[string]string) string {
	t.Helper()
	sha := repo.Commit(t, msg, files)
	requestReconcile(t, ctx, e, msg)
	return sha
}

// requestReconcile asks the Sync to reconcile now, after commit msg,
// without waiting for the result.
func requestReconcile(t *testing.T, ctx context.Context, e *cluster.Env, msg string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: syncName}}
	if err := e.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("after committing %q: requesting a reconcile of Sync %s/%s: %v", msg, controllerNS, syncName, err)
	}
}

// agentLibvirtURI is the URI of the libvirtd the VM agent's pod runs on
// the node: its socket is in the pod's emptyDir libvirt-run
// (components/virt #VMAgent), which the host sees under the kubelet's
// pod directory.
func agentLibvirtURI(ctx context.Context, e *cluster.Env) (string, error) {
	pods, err := podsOf(ctx, e.Clientset, hcNamespace, agentSelector)
	if err != nil {
		return "", err
	}
	if len(pods) != 1 {
		return "", fmt.Errorf("%d VM agent pods (%s in %s), want 1", len(pods), agentSelector, hcNamespace)
	}
	sock := filepath.Join(localcluster.DefaultKubeletRootDir, "pods", string(pods[0].UID), "volumes", "kubernetes.io~empty-dir", "libvirt-run", "libvirt-sock")
	if _, err := os.Stat(sock); err != nil {
		return "", fmt.Errorf("the agent's libvirt socket: %w", err)
	}
	// that path is longer than a unix socket address may be (108 bytes):
	// connect through a symbolic link with a short path
	agentSocketDir.once.Do(func() {
		agentSocketDir.path, agentSocketDir.err = os.MkdirTemp("", "cvlv-")
		if agentSocketDir.err == nil {
			atEnd = append(atEnd, func() { _ = os.RemoveAll(agentSocketDir.path) })
		}
	})
	if agentSocketDir.err != nil {
		return "", agentSocketDir.err
	}
	link := filepath.Join(agentSocketDir.path, string(pods[0].UID)[:8])
	if err := os.Symlink(sock, link); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("the agent's libvirt socket: %w", err)
	}
	return "qemu:///system?socket=" + link, nil
}

// agentSocketDir holds the short links to the agent pods' libvirt
// sockets (agentLibvirtURI), removed when the tests end.
var agentSocketDir struct {
	once sync.Once
	path string
	err  error
}

// virsh runs virsh against uri.
func virsh(uri string, args ...string) (string, error) {
	cmd := exec.Command("virsh", append([]string{"-c", uri}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// agentDomains lists the domains (running or not) of the agent's libvirtd.
func agentDomains(ctx context.Context, e *cluster.Env) ([]string, error) {
	uri, err := agentLibvirtURI(ctx, e)
	if err != nil {
		return nil, err
	}
	out, err := virsh(uri, "list", "--all", "--name")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// qemuOf gives the PIDs of QEMU processes on the host running domain
// (QEMU's -name guest=<domain>,...).
func qemuOf(domain string) []string {
	var pids []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte("guest="+domain+",")) {
			pids = append(pids, d.Name())
		}
	}
	return pids
}

// logFrom gives the file's content from byte offset on: all of it when
// it is shorter (written anew since), "" when it is missing.
func logFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if int64(len(b)) < offset {
		return string(b)
	}
	return string(b[offset:])
}

// fileSize gives the file's size, 0 when it is missing.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// tail gives the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// dhcpLeases gives the addresses of the CONVERGE-GUEST-DHCP lines of the
// guest named host in log: ip=ADDR/PREFIX → router.
func dhcpLeases(log, host string) map[string]string {
	out := map[string]string{}
	prefix := guestimage.MarkerDHCP + " " + host + " ip="
	for _, l := range strings.Split(log, "\n") {
		i := strings.Index(l, prefix)
		if i < 0 {
			continue
		}
		ip, router, _ := strings.Cut(strings.TrimSpace(l[i+len(prefix):]), " router=")
		out[ip] = router
	}
	return out
}

// inSubnet tells whether cidr's address is in subnet.
func inSubnet(cidr, subnet string) bool {
	ip, _, err := net.ParseCIDR(cidr)
	_, n, err2 := net.ParseCIDR(subnet)
	return err == nil && err2 == nil && n.Contains(ip)
}

// nodeLeftovers lists what of the VMIs uids (and of the volume volumeID
// of the pool, when not "") is still on the node: a domain in the
// agent's libvirt, a QEMU process, the VMI's directory of disks, its
// network namespace, the volume's directory.
func nodeLeftovers(ctx context.Context, e *cluster.Env, domain string, uids []types.UID, volumeID string) []string {
	var left []string
	doms, err := agentDomains(ctx, e)
	if err != nil {
		left = append(left, "(the agent's libvirt: "+err.Error()+")")
	}
	for _, d := range doms {
		if d == domain {
			left = append(left, "domain "+d+" in the agent's libvirtd")
		}
	}
	for _, p := range qemuOf(domain) {
		left = append(left, "QEMU process "+p+" of "+domain)
	}
	for _, uid := range uids {
		ns, name, _ := strings.Cut(domain, "_")
		dir := filepath.Join(agentStateDir, "vmis", ns+"_"+name+"_"+string(uid))
		if _, err := os.Stat(dir); err == nil {
			left = append(left, "the VMI's disks "+dir)
		}
		netns := filepath.Join(netattach.NetnsDir, netattach.NetnsName(uid))
		if _, err := os.Stat(netns); err == nil {
			left = append(left, "network namespace "+netns)
		}
	}
	if volumeID != "" {
		dir := filepath.Join(poolPath, volumeID)
		if _, err := os.Stat(dir); err == nil {
			left = append(left, "the volume's directory "+dir)
		}
	}
	return left
}

// findUnder gives the paths below root whose path contains s.
func findUnder(root, s string) []string {
	var found []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(p, s) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// metaListAll lists everything.
var metaListAll = metav1.ListOptions{}

// addBridge makes the Linux bridge name on the host, up, unless it
// exists; it is deleted in t.Cleanup when the test made it.
func addBridge(t *testing.T, name string) {
	t.Helper()
	if _, err := net.InterfaceByName(name); err == nil {
		return
	}
	for _, argv := range [][]string{{"ip", "link", "add", name, "type", "bridge"}, {"ip", "link", "set", name, "up"}} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	t.Cleanup(func() { deleteLink(t, name) })
}

// deleteLink deletes the network interface name of the host, if it
// exists.
func deleteLink(t *testing.T, name string) {
	t.Helper()
	if _, err := net.InterfaceByName(name); err != nil {
		return
	}
	if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
		t.Errorf("ip link del %s: %v: %s", name, err, out)
	}
}
