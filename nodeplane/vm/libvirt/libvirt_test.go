package libvirt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
	"github.com/converge-dev/converge/nodeplane/vm/libvirt"
)

// emptyNode connects to a private test-driver node with no domains.
func emptyNode(t *testing.T) *libvirt.Conn {
	t.Helper()
	c, err := libvirt.OpenEmptyTestNode(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testDomainXML(t *testing.T, name string) string {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name, vmi.UID = "ns", name, types.UID(uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)).String())
	q := resource.MustParse("64Mi")
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	opts := domain.DefaultOptions()
	opts.DomainType, opts.Emulator = "test", ""
	d, err := domain.Build(vmi, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantState(t *testing.T, c *libvirt.Conn, name string, state hypervisor.State, reason hypervisor.Reason) hypervisor.Domain {
	t.Helper()
	d, err := c.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != state || d.Reason != reason {
		t.Fatalf("domain %s: state %s/%q, want %s/%q", name, d.State, d.Reason, state, reason)
	}
	return d
}

// TestLifecycle drives one domain through define, start, shutdown, start,
// destroy and undefine on the test driver, checking state, reason and that
// converge's metadata survives libvirt's round trip.
func TestLifecycle(t *testing.T) {
	c := emptyNode(t)
	if v, err := c.Version(); err != nil || v < 9000000 {
		t.Fatalf("libvirt version %d, %v; want >= 9.0.0", v, err)
	}
	name := domain.Name("ns", "vm1")
	if _, err := c.Lookup(name); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Fatalf("lookup before define: %v, want ErrNotFound", err)
	}
	if err := c.Define(testDomainXML(t, "vm1")); err != nil {
		t.Fatal(err)
	}
	d := wantState(t, c, name, hypervisor.Shutoff, hypervisor.ReasonNone)
	if m, ok := domain.MetadataOf(d.XML); !ok || m.Name != "vm1" || m.Namespace != "ns" {
		t.Fatalf("metadata after libvirt round trip: %+v %v\n%s", m, ok, d.XML)
	}
	if err := c.Start(name); err != nil {
		t.Fatal(err)
	}
	wantState(t, c, name, hypervisor.Running, hypervisor.ReasonNone)
	if err := c.Shutdown(name); err != nil {
		t.Fatal(err)
	}
	// the test driver powers off at once
	wantState(t, c, name, hypervisor.Shutoff, hypervisor.ReasonShutdown)
	if err := c.Start(name); err != nil {
		t.Fatal(err)
	}
	if err := c.Destroy(name); err != nil {
		t.Fatal(err)
	}
	wantState(t, c, name, hypervisor.Shutoff, hypervisor.ReasonDestroyed)
	if err := c.Undefine(name); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(name); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Fatalf("start after undefine: %v, want ErrNotFound", err)
	}
	list, err := c.List()
	if err != nil || len(list) != 0 {
		t.Fatalf("List after undefine: %v %v", list, err)
	}
}

// TestDefaultDriverIsShared documents the test:///default facts the agent
// tests rely on: it holds a non-converge domain "test", and a second
// connection sees the domains the first one defined.
func TestDefaultDriverIsShared(t *testing.T) {
	a, err := libvirt.Connect("test:///default")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := libvirt.Connect("test:///default")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Lookup("test"); err != nil {
		t.Fatalf("built-in domain: %v", err)
	}
	name := domain.Name("ns", "shared")
	if err := a.Define(testDomainXML(t, "shared")); err != nil {
		t.Fatal(err)
	}
	defer a.Undefine(name)
	if _, err := b.Lookup(name); err != nil {
		t.Errorf("second connection does not see the first one's domain: %v", err)
	}
}

func TestEvents(t *testing.T) {
	c := emptyNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	events, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := domain.Name("ns", "ev")
	if err := c.Define(testDomainXML(t, "ev")); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(name); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	timeout := time.After(30 * time.Second) // a hang guard, not a latency assertion
	start := time.Now()
	for !seen["Started"] {
		select {
		case ev := <-events:
			if ev.Name != name {
				t.Fatalf("event for %q, want %q", ev.Name, name)
			}
			seen[ev.Type] = true
			t.Logf("event %s %q after %v", ev.Name, ev.Detail, time.Since(start))
		case <-timeout:
			t.Fatalf("no Started event; saw %v", seen)
		}
	}
	cancel()
	for range events {
	}
}
