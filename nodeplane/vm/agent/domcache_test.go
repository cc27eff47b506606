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
