package dhcp

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// DNS is what a guest is told about name resolution.
type DNS struct {
	// Servers are the IPv4 name servers.
	Servers []netip.Addr
	// Search are the search domains, lower case.
	Search []string
}

// ReadResolvConf reads path (the node's resolv.conf, which a pod with
// dnsPolicy Default gets) as KubeVirt reads the pod's
// (pkg/network/dns/resolveconf.go ParseNameservers, ParseSearchDomains):
// the IPv4 nameserver lines and the domains of every search line.
// Loopback name servers (a local stub such as systemd-resolved's
// 127.0.0.53) are left out: the guest cannot reach the node's loopback.
// KubeVirt's fallbacks when there is none (the name server 8.8.8.8, the
// search domain cluster.local) are not applied: a guest is told of no
// server rather than of one the node never named.
func ReadResolvConf(path string) (DNS, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return DNS{}, fmt.Errorf("resolv.conf: %w", err)
	}
	return ParseResolvConf(b), nil
}

// ParseResolvConf parses a resolv.conf's content (see ReadResolvConf).
func ParseResolvConf(b []byte) DNS {
	var d DNS
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			a, err := netip.ParseAddr(f[1])
			if err == nil && a.Is4() && !a.IsLoopback() {
				d.Servers = append(d.Servers, a)
			}
		case "search":
			for _, dom := range f[1:] {
				d.Search = append(d.Search, strings.ToLower(dom))
			}
		}
	}
	return d
}

// WithVMI gives d as the VMI's guest sees it, as KubeVirt's pod would
// have it: with dnsPolicy None only spec.dnsConfig's name servers and
// searches, else d followed by them (the kubelet's merge,
// pkg/kubelet/network/dns appendDNSConfig); and with spec.subdomain the
// domain "<subdomain>.<longest service search domain>" first
// (kubevirt pkg/network/dns DomainNameWithSubdomain, as startDHCP adds
// it). spec.dnsConfig.options cannot be given by DHCP: the caller refuses
// them.
func (d DNS) WithVMI(spec *kubevirtv1.VirtualMachineInstanceSpec) (DNS, error) {
	out := DNS{Servers: append([]netip.Addr(nil), d.Servers...), Search: append([]string(nil), d.Search...)}
	if spec.DNSPolicy == "None" {
		out = DNS{}
	}
	if c := spec.DNSConfig; c != nil {
		for i, s := range c.Nameservers {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return DNS{}, fmt.Errorf("spec.dnsConfig.nameservers[%d]: %q: expected an IP address", i, s)
			}
			if a.Is4() {
				out.Servers = append(out.Servers, a)
			}
		}
		for _, s := range c.Searches {
			out.Search = append(out.Search, strings.ToLower(s))
		}
	}
	if dom := DomainNameWithSubdomain(out.Search, spec.Subdomain); dom != "" {
		out.Search = append([]string{dom}, out.Search...)
	}
	return out, nil
}

// DomainName gives the longest search domain, which KubeVirt offers as
// the domain name (option 15; Windows resolves with it): pkg/network/dns
// GetDomainName.
func (d DNS) DomainName() string {
	longest := ""
	for _, s := range d.Search {
		if len(s) > len(longest) {
			longest = s
		}
	}
	return longest
}

// DomainNameWithSubdomain gives "<subdomain>.<the longest search domain
// holding .svc.>", or "" when subdomain is empty, no search domain is a
// service domain, or that domain starts with the subdomain already
// (kubevirt pkg/network/dns DomainNameWithSubdomain).
func DomainNameWithSubdomain(search []string, subdomain string) string {
	if subdomain == "" {
		return ""
	}
	longest := ""
	for _, s := range search {
		if strings.Contains(s, ".svc.") && len(s) > len(longest) {
			longest = s
		}
	}
	if longest == "" || strings.HasPrefix(longest, subdomain+".") {
		return ""
	}
	return subdomain + "." + longest
}

// Hostname gives the guest's host name as KubeVirt gives the pod's
// (pkg/util/net/dns SanitizeHostname): spec.hostname, else the VMI's name
// up to its first dot, at most 63 characters.
func Hostname(vmi *kubevirtv1.VirtualMachineInstance) string {
	if vmi.Spec.Hostname != "" {
		return vmi.Spec.Hostname
	}
	h, _, _ := strings.Cut(vmi.Name, ".")
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}
