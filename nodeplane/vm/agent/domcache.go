package agent

import (
	"encoding/xml"

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
	dom *liveDomain
	err error
}

// liveDomain is the part of a domain's XML the agent reads: the machine
// type, the interfaces' MACs and aliases, and the disks. Decoding only
// these (encoding/xml skips the rest) takes half the time of a full
// libvirtxml.Domain, on the path of every VMI to Running.
type liveDomain struct {
	XMLName xml.Name `xml:"domain"`
	OS      *struct {
		Type *libvirtxml.DomainOSType `xml:"type"`
	} `xml:"os"`
	Devices *struct {
		Disks      []libvirtxml.DomainDisk `xml:"disk"`
		Interfaces []liveInterface         `xml:"interface"`
	} `xml:"devices"`
}

// liveInterface is what the agent reads of a domain interface.
type liveInterface struct {
	MAC   *libvirtxml.DomainInterfaceMAC `xml:"mac"`
	Alias *libvirtxml.DomainAlias        `xml:"alias"`
}

// parse gives d's XML parsed, and the parse error (the domain is then
// empty). The result is shared: callers must not modify it.
func (c *domainCache) parse(d hypervisor.Domain) (*liveDomain, error) {
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
	x := &liveDomain{}
	err := xml.Unmarshal([]byte(d.XML), x)
	if err != nil {
		x = &liveDomain{}
	}
	c.cur[d.Name] = cachedDomain{xml: d.XML, dom: x, err: err}
	return x, err
}

// endPass forgets the domains not parsed since the last endPass.
func (c *domainCache) endPass() {
	c.prev, c.cur = c.cur, nil
}
