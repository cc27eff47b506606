package domain_test

import (
	"testing"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

func TestMetadataOf(t *testing.T) {
	const vmi = `<cv:vmi xmlns:cv="https://converge.dev/xmlns/vm/v1" namespace="ns" name="vm" uid="u-1"></cv:vmi>`
	ours := domain.Metadata{Namespace: "ns", Name: "vm", UID: "u-1"}
	for _, tc := range []struct {
		name, xml string
		want      domain.Metadata
		ok        bool
	}{
		{"as libvirt writes it", `<domain type="kvm"><name>ns_vm</name><uuid>x</uuid><metadata>` + vmi + `</metadata><memory unit="KiB">65536</memory><devices><disk/></devices></domain>`, ours, true},
		{"after another application's element", `<domain><name>a</name><metadata><other:x xmlns:other="urn:o"><vmi namespace="no"/></other:x>` + vmi + `</metadata></domain>`, ours, true},
		{"default namespace", `<domain><metadata><vmi xmlns="https://converge.dev/xmlns/vm/v1" namespace="ns" name="vm" uid="u-1"/></metadata></domain>`, ours, true},
		{"no metadata", `<domain><name>a</name><devices/></domain>`, domain.Metadata{}, false},
		{"metadata of others only", `<domain><metadata><other:x xmlns:other="urn:o"/></metadata><devices>` + vmi + `</devices></domain>`, domain.Metadata{}, false},
		{"vmi element outside <metadata>", `<domain><description>` + vmi + `</description></domain>`, domain.Metadata{}, false},
		{"vmi without the namespace", `<domain><metadata><vmi namespace="ns" name="vm" uid="u-1"/></metadata></domain>`, domain.Metadata{}, false},
		{"not a domain", `<network><metadata>` + vmi + `</metadata></network>`, domain.Metadata{}, false},
		{"malformed before the metadata", `<domain><name>a</nam><metadata>` + vmi + `</metadata></domain>`, domain.Metadata{}, false},
		{"empty", ``, domain.Metadata{}, false},
	} {
		m, ok := domain.MetadataOf(tc.xml)
		m.XMLName = tc.want.XMLName
		if ok != tc.ok || m != tc.want {
			t.Errorf("%s: MetadataOf = %+v, %v; want %+v, %v", tc.name, m, ok, tc.want, tc.ok)
		}
	}
}
