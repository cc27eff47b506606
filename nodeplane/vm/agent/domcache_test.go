package agent

import (
	"testing"

	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

func TestDomainCache(t *testing.T) {
	a := hypervisor.Domain{Name: "ns_a", XML: `<domain><name>ns_a</name><os><type machine="pc-q35">hvm</type></os></domain>`}
	changed := a
	changed.XML = `<domain><name>ns_a</name><os><type machine="pc-i440fx">hvm</type></os></domain>`
	var c domainCache
	first, err := c.parse(a)
	if err != nil || first.OS.Type.Machine != "pc-q35" {
		t.Fatalf("parse = %+v, %v", first, err)
	}
	if again, _ := c.parse(a); again != first {
		t.Error("the same XML in the same pass was parsed again")
	}
	c.endPass()
	if next, _ := c.parse(a); next != first {
		t.Error("the same XML in the next pass was parsed again")
	}
	c.endPass()
	if x, _ := c.parse(changed); x == first || x.OS.Type.Machine != "pc-i440fx" {
		t.Errorf("changed XML: got the old parse (%v) or machine %q", x == first, x.OS.Type.Machine)
	}
	c.endPass()
	c.endPass() // a pass that did not look ns_a up forgets it
	if len(c.prev) != 0 {
		t.Errorf("after a pass without lookups the cache holds %d domains", len(c.prev))
	}
	if _, err := c.parse(hypervisor.Domain{Name: "bad", XML: "<domain>"}); err == nil {
		t.Error("malformed XML parsed without an error")
	}
}

// TestLiveDomain: parse reads, from a domain's XML as libvirt gives it,
// the machine type, each interface's MAC and alias (in order) and the
// disks' target, driver, read-only flag and alias; a document that is
// not a <domain> is an error.
func TestLiveDomain(t *testing.T) {
	const live = `<domain type='kvm' id='3'>
  <name>ns_a</name>
  <metadata><vmi xmlns="https://converge.dev/xmlns/vm/v1" namespace="ns" name="a" uid="u"/></metadata>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type><boot dev='hd'/></os>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='/d.img'/><target dev='vda' bus='virtio'/><readonly/><alias name='ua-root'/></disk>
    <interface type='bridge'><mac address='52:54:00:00:00:01'/><source bridge='br0'/><alias name='ua-default'/></interface>
    <interface type='ethernet'><mac address='52:54:00:00:00:02'/><target dev='tap1'/></interface>
  </devices>
</domain>`
	var c domainCache
	x, err := c.parse(hypervisor.Domain{Name: "ns_a", XML: live})
	if err != nil {
		t.Fatal(err)
	}
	if x.OS == nil || x.OS.Type == nil || x.OS.Type.Machine != "pc-q35-7.2" {
		t.Errorf("os %+v, want machine pc-q35-7.2", x.OS)
	}
	if x.Devices == nil || len(x.Devices.Interfaces) != 2 || len(x.Devices.Disks) != 1 {
		t.Fatalf("devices %+v, want 2 interfaces and 1 disk", x.Devices)
	}
	if i := x.Devices.Interfaces[0]; i.MAC == nil || i.MAC.Address != "52:54:00:00:00:01" || i.Alias == nil || i.Alias.Name != "ua-default" {
		t.Errorf("interface 0: %+v", i)
	}
	if i := x.Devices.Interfaces[1]; i.MAC == nil || i.MAC.Address != "52:54:00:00:00:02" || i.Alias != nil {
		t.Errorf("interface 1: %+v", i)
	}
	d := x.Devices.Disks[0]
	if d.Target == nil || d.Target.Dev != "vda" || d.Driver == nil || d.Driver.Type != "raw" || d.ReadOnly == nil || d.Alias == nil || d.Alias.Name != "ua-root" {
		t.Errorf("disk %+v", d)
	}
	if _, err := c.parse(hypervisor.Domain{Name: "net", XML: `<network><name>n</name></network>`}); err == nil {
		t.Error("a <network> parsed as a domain")
	}
}
