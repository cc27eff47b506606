package vmisupport_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/api/vmisupport"
)

var update = flag.Bool("update", os.Getenv("UPDATE_GOLDEN") == "1", "rewrite docs/vmi-support.md and doc.go's table")

func TestRejectedNotesKeepMessagesSplittable(t *testing.T) {
	for _, f := range vmisupport.SupportTable() {
		if strings.Contains(f.Note, "; ") {
			t.Errorf("%s: note %q contains \"; \", the FieldErrors separator", f.Path, f.Note)
		}
	}
}

// TestCheckSpec: the fields set in a spec that the table rejects or does
// not know, with their paths (list indexes, not [*]) in path order; the
// fields it supports or ignores, and everything below an ignored or leaf
// field, pass.
func TestCheckSpec(t *testing.T) {
	mem := resource.MustParse("64Mi")
	for _, tc := range []struct {
		name string
		spec func(s *kubevirtv1.VirtualMachineInstanceSpec)
		want []string
	}{
		{"empty", func(*kubevirtv1.VirtualMachineInstanceSpec) {}, nil},
		{"supported", func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Memory = &kubevirtv1.Memory{Guest: &mem}
			s.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: "virtio"}}}}
		}, nil},
		{"leaf taken whole", func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.NodeSelector = map[string]string{"any.key/at-all": "x"}
		}, nil},
		{"ignored taken whole", func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.1"}}
		}, nil},
		{"rejected with its note, at its index", func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "a"}, {Name: "b", DiskDevice: kubevirtv1.DiskDevice{LUN: &kubevirtv1.LunTarget{}}}}
		}, []string{"spec.domain.devices.disks[1].lun: not supported by converge (no SCSI passthrough)"}},
		{"rejected without a note, sorted", func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Watchdog = &kubevirtv1.Watchdog{Name: "w"}
			s.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "g", DeviceName: "x"}}
		}, []string{
			"spec.domain.devices.gpus: not supported by converge",
			"spec.domain.devices.watchdog: not supported by converge",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &kubevirtv1.VirtualMachineInstanceSpec{}
			tc.spec(s)
			var got []string
			for _, e := range vmisupport.CheckSpec(s) {
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFieldErrors: Add formats the reason, Sorted orders by path keeping
// the order of equal paths, Error joins with "; ".
func TestFieldErrors(t *testing.T) {
	var errs vmisupport.FieldErrors
	errs.Add("spec.b", "second %d", 2)
	errs.Add("spec.a", "first")
	errs.Add("spec.b", "third")
	if got, want := errs.Sorted().Error(), "spec.a: first; spec.b: second 2; spec.b: third"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestSupportTableInDoc keeps the package comment's table in step with
// SupportTable (UPDATE_GOLDEN=1 rewrites the comment).
func TestSupportTableInDoc(t *testing.T) {
	var rows strings.Builder
	rows.WriteString("//\n") // gofmt's blank line around a code block
	for _, f := range vmisupport.SupportTable() {
		line := fmt.Sprintf("//	%-62s %-9s %s", f.Path, f.Support, f.Note)
		rows.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	rows.WriteString("//\n")
	raw, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "// BEGIN SUPPORT TABLE\n", "// END SUPPORT TABLE\n"
	i, j := bytes.Index(raw, []byte(begin)), bytes.Index(raw, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("doc.go: missing %q … %q markers", begin, end)
	}
	current := string(raw[i+len(begin) : j])
	if current == rows.String() {
		return
	}
	if *update {
		out := string(raw[:i+len(begin)]) + rows.String() + string(raw[j:])
		if err := os.WriteFile("doc.go", []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("doc.go's support table is out of date; run UPDATE_GOLDEN=1 go test ./api/vmisupport")
}
