package domain

import (
	"encoding/xml"
	"testing"
)

// TestMetadataMarshal: marshal writes what xml.Marshal writes, for plain
// values and values with every character encoding/xml escapes (and
// invalid UTF-8), and MetadataOf reads it back.
func TestMetadataMarshal(t *testing.T) {
	for _, m := range []Metadata{
		{Namespace: "ns", Name: "vm", UID: "4f0b3c2e-0000-4000-8000-000000000001"},
		{},
		{Namespace: `a"b'c`, Name: "x&y<z>", UID: "tab\tnl\ncr\r"},
		{Namespace: "é✓", Name: "bad\xffutf8", UID: "\x00ctl"},
	} {
		want, err := xml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got := m.marshal().XML
		if got != string(want) {
			t.Errorf("%+v:\n got %s\nwant %s", m, got, want)
		}
		back, ok := MetadataOf("<domain><metadata>" + got + "</metadata></domain>")
		back.XMLName = m.XMLName
		if m.Namespace == "ns" && (!ok || back != m) {
			t.Errorf("MetadataOf(marshal(%+v)) = %+v, %v", m, back, ok)
		}
	}
}
