package agent

import (
	"libvirt.org/go/libvirtxml"

	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

// domainCache keeps each domain's parsed XML from one pass to the next,
// by domain name, for as long as libvirt returns the same XML. Every pass
// reads the machine type and interfaces (observe) and the disks
// (expandDisks) of every running domain; parsing the XML was most of a
// pass's CPU, and a running domain's XML rarely changes. A domain not
// looked up during a pass is forgotten at its end. Not safe for
// concurrent use (Reconcile is not called concurrently).
type domainCache struct {
	prev, cur map[string]cachedDomain
}

type cachedDomain struct {
	xml string
	dom *libvirtxml.Domain
	err error
}

// parse gives d's XML parsed, and the parse error (the domain is then
// empty). The result is shared: callers must not modify it.
func (c *domainCache) parse(d hypervisor.Domain) (*libvirtxml.Domain, error) {
	if c.cur == nil {
		c.cur = map[string]cachedDomain{}
	}
	if e, ok := c.cur[d.Name]; ok && e.xml == d.XML {
		return e.dom, e.err
	}
	if e, ok := c.prev[d.Name]; ok && e.xml == d.XML {
		c.cur[d.Name] = e
		return e.dom, e.err
	}
	x := &libvirtxml.Domain{}
	err := x.Unmarshal(d.XML)
	c.cur[d.Name] = cachedDomain{xml: d.XML, dom: x, err: err}
	return x, err
}

// endPass forgets the domains not parsed since the last endPass.
func (c *domainCache) endPass() {
	c.prev, c.cur = c.cur, nil
}
