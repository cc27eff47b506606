package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
	"github.com/converge-dev/converge/nodeplane/vm/libvirt"
)

const node = "node-1"

// privateNode connects to libvirt's test driver with its own empty state
// (test:///<abs path>), so tests do not see each other's domains.
func privateNode(t testing.TB) *libvirt.Conn {
	t.Helper()
	c, err := libvirt.OpenEmptyTestNode(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// clock is a manual clock for grace periods.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func options(c *clock) agent.Options {
	o := agent.DefaultOptions(node)
	o.Domain.DomainType, o.Domain.Emulator = "test", "" // the test driver runs type 'test' and no QEMU
	o.Domain.ResolveBridge = func(string, kubevirtv1.Network) (string, error) { return "cvbr0", nil }
	o.Now = c.now
	return o
}

func newVMI(name string, grace int64) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name = "ns", name
	vmi.UID = types.UID(uuid.NewSHA1(uuid.NameSpaceOID, []byte(name+fmt.Sprint(grace))).String())
	q := resource.MustParse("64Mi")
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	vmi.Spec.TerminationGracePeriodSeconds = &grace
	vmi.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}}
	vmi.Spec.Networks = []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
	return vmi
}

// settle reconciles and stores the reports until the agent asks for no
// immediate requeue, as Run does, and returns the last result.
func settle(t *testing.T, a *agent.Agent, src *agent.StaticSource) agent.Result {
	t.Helper()
	for i := 0; i < 10; i++ {
		res := a.Reconcile(src.List())
		for _, r := range res.Reports {
			src.Store(r)
		}
		if len(res.Errors) > 0 {
			t.Fatalf("reconcile errors: %v", res.Errors)
		}
		if !res.Requeue {
			return res
		}
	}
	t.Fatal("agent still requeueing after 10 rounds")
	return agent.Result{}
}

func wantDomain(t *testing.T, hv hypervisor.Hypervisor, name string, state hypervisor.State) {
	t.Helper()
	d, err := hv.Lookup(name)
	if err != nil {
		t.Fatalf("domain %s: %v", name, err)
	}
	if d.State != state {
		t.Fatalf("domain %s: state %s, want %s", name, d.State, state)
	}
}

func wantNoDomain(t *testing.T, hv hypervisor.Hypervisor, name string) {
	t.Helper()
	if _, err := hv.Lookup(name); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Fatalf("domain %s still there (%v)", name, err)
	}
}

func ready(st kubevirtv1.VirtualMachineInstanceStatus) (string, string) {
	for _, c := range st.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			return string(c.Status), c.Reason
		}
	}
	return "", ""
}

func phases(st kubevirtv1.VirtualMachineInstanceStatus) string {
	var p []string
	for _, t := range st.PhaseTransitionTimestamps {
		p = append(p, string(t.Phase))
	}
	return strings.Join(p, ",")
}

// TestStartAndDelete: a new VMI is defined and started and reported
// Running and Ready with its MAC; deleting it shuts the guest down (the
// test driver powers off at once), undefines the domain and reports it
// Removed, Succeeded.
func TestStartAndDelete(t *testing.T) {
	hv, clk := privateNode(t), &clock{t: time.Unix(1000, 0)}
	a := agent.New(hv, options(clk))
	vmi := newVMI("web", 30)
	src := agent.NewStaticSource(vmi)
	settle(t, a, src)
	got := src.Get("ns", "web")
	if got.Status.Phase != kubevirtv1.Running || got.Status.NodeName != node {
		t.Fatalf("phase %s node %q, want Running on %s", got.Status.Phase, got.Status.NodeName, node)
	}
	if s, _ := ready(got.Status); s != "True" {
		t.Errorf("Ready %s, want True", s)
	}
	if len(got.Status.Interfaces) != 1 || got.Status.Interfaces[0].MAC != domain.MAC(string(vmi.UID), "default") {
		t.Errorf("interfaces %+v, want the default MAC %s", got.Status.Interfaces, domain.MAC(string(vmi.UID), "default"))
	}
	if got.Status.Machine == nil || got.Status.Machine.Type != "q35" {
		t.Errorf("machine %+v, want q35", got.Status.Machine)
	}
	wantDomain(t, hv, "ns_web", hypervisor.Running)
	// a second pass changes nothing
	if res := settle(t, a, src); len(res.Reports) != 1 || res.RequeueAfter != 0 || len(res.Orphans) != 0 {
		t.Errorf("steady state result %+v", res)
	}

	src.Delete("ns", "web", clk.now())
	res := a.Reconcile(src.List())
	if len(res.Errors) > 0 || len(res.Reports) != 1 || !res.Reports[0].Removed {
		t.Fatalf("delete: %+v", res)
	}
	if p := res.Reports[0].Status.Phase; p != kubevirtv1.Succeeded {
		t.Errorf("phase after graceful delete %s, want Succeeded", p)
	}
	src.Store(res.Reports[0])
	wantNoDomain(t, hv, "ns_web")
	if src.Get("ns", "web") != nil {
		t.Error("source still holds the removed VMI")
	}
}

// TestGuestStops: the guest powering off makes the VMI Succeeded, a domain
// destroyed behind the agent's back makes it Failed; either way the domain
// is undefined once the final phase is stored, and the VMI stays final.
func TestGuestStops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stop   func(hypervisor.Hypervisor, string) error
		phase  kubevirtv1.VirtualMachineInstancePhase
		reason string
	}{
		{"guest poweroff", hypervisor.Hypervisor.Shutdown, kubevirtv1.Succeeded, "Shutdown"},
		{"destroyed outside", hypervisor.Hypervisor.Destroy, kubevirtv1.Failed, "Destroyed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hv, clk := privateNode(t), &clock{t: time.Unix(1000, 0)}
			a := agent.New(hv, options(clk))
			src := agent.NewStaticSource(newVMI("job", 30))
			settle(t, a, src)
			if err := tc.stop(hv, "ns_job"); err != nil {
				t.Fatal(err)
			}
			settle(t, a, src)
			got := src.Get("ns", "job")
			if got.Status.Phase != tc.phase || got.Status.Reason != tc.reason {
				t.Errorf("phase %s reason %q, want %s %q", got.Status.Phase, got.Status.Reason, tc.phase, tc.reason)
			}
			if p := phases(got.Status); p != "Running,"+string(tc.phase) {
				t.Errorf("phase transitions %s", p)
			}
			wantNoDomain(t, hv, "ns_job")
			settle(t, a, src)
			if got := src.Get("ns", "job"); got.Status.Phase != tc.phase {
				t.Errorf("phase changed to %s after the domain went", got.Status.Phase)
			}
			wantNoDomain(t, hv, "ns_job")
		})
	}
}

// TestRestartRecovery: a new agent on the same libvirt state, given the
// VMIs with their stored status, keeps the running VMI Running, marks the
// VMI whose domain vanished Failed, removes the converge domain no VMI
// claims, and leaves a domain converge did not create alone.
func TestRestartRecovery(t *testing.T) {
	hv, clk := privateNode(t), &clock{t: time.Unix(1000, 0)}
	first := agent.New(hv, options(clk))
	keep, lost, orphan := newVMI("keep", 30), newVMI("lost", 30), newVMI("orphan", 30)
	src := agent.NewStaticSource(keep, lost, orphan)
	settle(t, first, src)
	for _, n := range []string{"ns_keep", "ns_lost", "ns_orphan"} {
		wantDomain(t, hv, n, hypervisor.Running)
	}
	// a domain converge did not create
	foreign := strings.Replace(testDomainXMLWithoutMetadata(t), "ns_plain", "foreign_vm", 1)
	if err := hv.Define(foreign); err != nil {
		t.Fatal(err)
	}
	// while the agent is down: lost's domain disappears, orphan's VMI is
	// deleted for good
	if err := hv.Destroy("ns_lost"); err != nil {
		t.Fatal(err)
	}
	if err := hv.Undefine("ns_lost"); err != nil {
		t.Fatal(err)
	}
	vmis := src.List()
	src = agent.NewStaticSource(vmis[0], vmis[1])

	second := agent.New(hv, options(clk))
	if res := second.Reconcile(src.List()); len(res.Orphans) != 1 || res.Orphans[0] != "ns_orphan" {
		t.Errorf("orphans %v, want [ns_orphan]", res.Orphans)
	}
	res := settle(t, second, src)
	if got := src.Get("ns", "keep"); got.Status.Phase != kubevirtv1.Running || phases(got.Status) != "Running" {
		t.Errorf("keep: phase %s transitions %s, want Running only", got.Status.Phase, phases(got.Status))
	}
	if got := src.Get("ns", "lost"); got.Status.Phase != kubevirtv1.Failed || got.Status.Reason != "DomainVanished" {
		t.Errorf("lost: phase %s reason %q, want Failed DomainVanished", got.Status.Phase, got.Status.Reason)
	}
	if len(res.Orphans) != 0 {
		t.Errorf("orphans still reported after settling: %v", res.Orphans)
	}
	wantNoDomain(t, hv, "ns_orphan")
	wantNoDomain(t, hv, "ns_lost")
	wantDomain(t, hv, "ns_keep", hypervisor.Running)
	wantDomain(t, hv, "foreign_vm", hypervisor.Shutoff)
}

func testDomainXMLWithoutMetadata(t *testing.T) string {
	t.Helper()
	o := options(&clock{}).Domain
	d, err := domain.Build(newVMI("plain", 1), o)
	if err != nil {
		t.Fatal(err)
	}
	d.Metadata = nil
	s, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deafGuest is the test driver with a guest that ignores ACPI shutdown
// requests: Shutdown is counted and dropped. The test driver itself
// powers off at once, so this is the only way to exercise the grace period.
type deafGuest struct {
	hypervisor.Hypervisor
	shutdowns int
}

func (d *deafGuest) Shutdown(string) error { d.shutdowns++; return nil }

// TestGracePeriodThenDestroy: deleting a VMI whose guest ignores the
// shutdown request destroys the domain once terminationGracePeriodSeconds
// have passed on the agent's clock, not before, and reports it Failed.
func TestGracePeriodThenDestroy(t *testing.T) {
	hv, clk := &deafGuest{Hypervisor: privateNode(t)}, &clock{t: time.Unix(1000, 0)}
	a := agent.New(hv, options(clk))
	src := agent.NewStaticSource(newVMI("stubborn", 20))
	settle(t, a, src)
	src.Delete("ns", "stubborn", clk.now())

	res := settle(t, a, src)
	if hv.shutdowns != 1 || res.RequeueAfter != 20*time.Second {
		t.Fatalf("after delete: %d shutdown requests, requeue after %v; want 1 and 20s", hv.shutdowns, res.RequeueAfter)
	}
	wantDomain(t, hv, "ns_stubborn", hypervisor.Running)
	if s, r := ready(src.Get("ns", "stubborn").Status); s != "False" || r != "Deleting" {
		t.Errorf("Ready %s/%s while deleting", s, r)
	}

	clk.advance(15 * time.Second)
	res = settle(t, a, src)
	if hv.shutdowns != 1 || res.RequeueAfter != 5*time.Second {
		t.Fatalf("mid-grace: %d shutdown requests, requeue after %v; want 1 and 5s", hv.shutdowns, res.RequeueAfter)
	}
	wantDomain(t, hv, "ns_stubborn", hypervisor.Running)

	clk.advance(5 * time.Second)
	res = a.Reconcile(src.List())
	if len(res.Reports) != 1 || !res.Reports[0].Removed || res.Reports[0].Status.Phase != kubevirtv1.Failed {
		t.Fatalf("after grace: %+v", res)
	}
	wantNoDomain(t, hv, "ns_stubborn")
}

// TestUnsupportedVMIFails: a VMI outside the support table is reported
// Failed with the field path, and nothing is defined.
func TestUnsupportedVMIFails(t *testing.T) {
	hv, clk := privateNode(t), &clock{t: time.Unix(1000, 0)}
	a := agent.New(hv, options(clk))
	vmi := newVMI("gpu", 30)
	vmi.Spec.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "g", DeviceName: "nvidia.com/x"}}
	src := agent.NewStaticSource(vmi)
	settle(t, a, src)
	got := src.Get("ns", "gpu")
	if got.Status.Phase != kubevirtv1.Failed || got.Status.Reason != "Unsupported" {
		t.Fatalf("phase %s reason %q", got.Status.Phase, got.Status.Reason)
	}
	var msg string
	for _, c := range got.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceSynchronized && c.Status == "False" {
			msg = c.Message
		}
	}
	if want := "VirtualMachineInstance ns/gpu: spec.domain.devices.gpus: not supported by converge"; msg != want {
		t.Errorf("Synchronized message %q, want %q", msg, want)
	}
	if l, _ := hv.List(); len(l) != 0 {
		t.Errorf("domains defined for a refused VMI: %v", l)
	}
}

// TestRecreatedVMI: a VMI recreated under the same name (new UID) waits
// while the old VMI's domain is removed, then gets its own.
func TestRecreatedVMI(t *testing.T) {
	hv, clk := privateNode(t), &clock{t: time.Unix(1000, 0)}
	a := agent.New(hv, options(clk))
	old := newVMI("db", 30)
	settle(t, a, agent.NewStaticSource(old))
	fresh := newVMI("db", 31) // same name, other UID
	src := agent.NewStaticSource(fresh)
	res := a.Reconcile(src.List())
	if len(res.Orphans) != 1 || res.Orphans[0] != "ns_db" {
		t.Fatalf("orphans %v, want [ns_db]", res.Orphans)
	}
	if _, r := ready(res.Reports[0].Status); r != "PreviousDomainPresent" {
		t.Errorf("Ready reason %q, want PreviousDomainPresent", r)
	}
	for _, r := range res.Reports {
		src.Store(r)
	}
	settle(t, a, src)
	d, err := hv.Lookup("ns_db")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.XML, string(fresh.UID)) || d.State != hypervisor.Running {
		t.Errorf("domain after recreation: state %s, uid %s not in XML", d.State, fresh.UID)
	}
}

// TestRun: the loop starts a VMI from a static source, reacts to its
// deletion, and returns when its context ends.
func TestRun(t *testing.T) {
	hv := privateNode(t)
	o := options(&clock{})
	o.Now = time.Now
	a := agent.New(hv, o)
	src := agent.NewStaticSource(newVMI("loop", 30))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- a.Run(ctx, src, time.Minute) }()
	waitReport := func(ok func(agent.Report) bool) agent.Report {
		t.Helper()
		guard := time.After(60 * time.Second) // hang guard only
		for {
			select {
			case r := <-src.Stored():
				if ok(r) {
					return r
				}
			case <-guard:
				t.Fatal("no such report within 60s")
			}
		}
	}
	waitReport(func(r agent.Report) bool { return r.Status.Phase == kubevirtv1.Running })
	t.Logf("VMI added -> Running report: %v (test driver)", time.Since(start))
	deleted := time.Now()
	src.Delete("ns", "loop", time.Now())
	waitReport(func(r agent.Report) bool { return r.Removed })
	t.Logf("VMI deleted -> Removed report: %v (test driver)", time.Since(deleted))
	wantNoDomain(t, hv, "ns_loop")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// recordingNetworks is a NetworkSetup that records its calls and gives a
// tap for every multus network; fail makes Setup fail. (The real one,
// nodeplane/network/netattach, is tested with the CNI plugins in its package.)
type recordingNetworks struct {
	calls []string
	fail  error
}

func (r *recordingNetworks) Setup(vmi *kubevirtv1.VirtualMachineInstance) (map[string]domain.Tap, error) {
	r.calls = append(r.calls, "setup "+vmi.Name)
	if r.fail != nil {
		return nil, r.fail
	}
	taps := map[string]domain.Tap{}
	for _, n := range vmi.Spec.Networks {
		if n.Multus != nil {
			taps[n.Name] = domain.Tap{Name: "cvt-" + vmi.Name, MTU: 1400}
		}
	}
	return taps, nil
}
func (r *recordingNetworks) Plumb(vmi *kubevirtv1.VirtualMachineInstance) error {
	r.calls = append(r.calls, "plumb "+vmi.Name)
	return nil
}
func (r *recordingNetworks) Check(vmi *kubevirtv1.VirtualMachineInstance) error {
	r.calls = append(r.calls, "check "+vmi.Name)
	return nil
}
func (r *recordingNetworks) Teardown(_, name string, _ types.UID) error {
	r.calls = append(r.calls, "teardown "+name)
	return nil
}

// TestNetworkHooks: with Options.Networks, a VMI's networks are set up
// before its domain is defined (the multus NIC becomes the tap Setup
// gave, type ethernet with its MTU), plumbed once after start, checked
// (not plumbed) by a restarted agent for the running domain, and torn
// down before the deleted VMI is reported Removed. A failing Setup
// defines nothing and leaves the VMI Scheduled, NetworkSetupFailed.
func TestNetworkHooks(t *testing.T) {
	hv, clk := privateNode(t), &clock{t: time.Unix(1000, 0)}
	nets := &recordingNetworks{}
	o := options(clk)
	o.Networks = nets
	vmi := newVMI("netvm", 30)
	vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces, kubevirtv1.Interface{Name: "blue", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}})
	vmi.Spec.Networks = append(vmi.Spec.Networks, kubevirtv1.Network{Name: "blue", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "blue-net"}}})
	src := agent.NewStaticSource(vmi)
	settle(t, agent.New(hv, o), src)
	if got := strings.Join(nets.calls, ", "); got != "setup netvm, plumb netvm" {
		t.Errorf("calls %q, want setup then plumb", got)
	}
	d, err := hv.Lookup("ns_netvm")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.XML, `<interface type='ethernet'>`) || !strings.Contains(d.XML, `dev='cvt-netvm'`) || !strings.Contains(d.XML, `<mtu size='1400'/>`) {
		t.Errorf("domain XML lacks the tap interface:\n%s", d.XML)
	}

	nets.calls = nil
	second := agent.New(hv, o) // an agent restart
	settle(t, second, src)
	settle(t, second, src)
	if got := strings.Join(nets.calls, ", "); got != "check netvm" {
		t.Errorf("calls after restart %q, want one check", got)
	}

	nets.calls = nil
	src.Delete("ns", "netvm", clk.now())
	res := second.Reconcile(src.List())
	if len(res.Reports) != 1 || !res.Reports[0].Removed {
		t.Fatalf("delete: %+v", res)
	}
	if got := strings.Join(nets.calls, ", "); got != "teardown netvm" {
		t.Errorf("calls on delete %q, want one teardown", got)
	}

	failing := &recordingNetworks{fail: errors.New("NetworkAttachmentDefinition ns/blue-net: not found")}
	o.Networks = failing
	vmi2 := vmi.DeepCopy()
	vmi2.Name, vmi2.UID = "netfail", "uid-netfail"
	src2 := agent.NewStaticSource(vmi2)
	res = agent.New(hv, o).Reconcile(src2.List())
	if len(res.Errors) != 1 || res.RequeueAfter == 0 {
		t.Fatalf("failing setup: %+v", res)
	}
	if st := res.Reports[0].Status; st.Phase != kubevirtv1.Scheduled {
		t.Errorf("phase %s, want Scheduled", st.Phase)
	} else if s, r := ready(st); s != "False" || r != "NetworkSetupFailed" {
		t.Errorf("Ready %s/%s, want False/NetworkSetupFailed", s, r)
	}
	wantNoDomain(t, hv, "ns_netfail")
}
