package graph

import (
	"testing"

	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/yaml"
)

// TestDeepestField: the admission checks' paths (dotted names, list
// indexes, bracketed map keys) point at the label of the deepest field the
// document has.
func TestDeepestField(t *testing.T) {
	const doc = `spec:
  template:
    spec:
      domain:
        devices:
          disks:
          - name: a
          - name: b
            lun: {}
        resources:
          requests:
            nvidia.com/gpu: 1
`
	f, err := yaml.Extract("vm.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	v := cuecontext.New().BuildFile(f)
	for _, tc := range []struct{ path, pos, found string }{
		{"spec.template.spec.domain.devices.disks[1].lun", "vm.yaml:9:13", "spec.template.spec.domain.devices.disks[1].lun"},
		{"spec.template.spec.domain.resources.requests[nvidia.com/gpu]", "vm.yaml:12:13", "spec.template.spec.domain.resources.requests[nvidia.com/gpu]"},
		{"spec.template.spec.domain.cpu.model", "vm.yaml:4:7", "spec.template.spec.domain"},
		{".spec.template", "vm.yaml:2:3", "spec.template"},
		{"status", "vm.yaml:1:1", ""},
		{"", "vm.yaml:1:1", ""},
	} {
		pos, found := deepestField(v, tc.path)
		if pos.String() != tc.pos || found != tc.found {
			t.Errorf("deepestField(%q) = %s, %q; want %s, %q", tc.path, pos, found, tc.pos, tc.found)
		}
	}
}
