package vmisupport_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/converge-dev/converge/api/vmisupport"
)

// supportDoc is the Markdown page generated from vmisupport.SupportTable().
const supportDoc = "../../docs/vmi-support.md"

// renderSupportDoc gives docs/vmi-support.md: an introduction and one
// table row per SupportTable() row, in its (path) order.
func renderSupportDoc(rows []vmisupport.Field) []byte {
	var b bytes.Buffer
	b.WriteString(`# The VirtualMachineInstance spec on converge

<!-- Generated from api/vmisupport.SupportTable() by
     TestSupportDocUpToDate; do not edit: change the table and run
     go test ./api/vmisupport -run TestSupportDocUpToDate -update -->

converge runs the ` + "`kubevirt.io/v1`" + ` VirtualMachine and VirtualMachineInstance
API unchanged, but only the part of the VMI spec below. Each row is a JSON
path under the VMI (under ` + "`spec.template`" + ` for a VirtualMachine), where
` + "`[*]`" + ` stands for any list index:

- **supported**: converge honours the field, with the restrictions in the note;
- **ignored**: accepted with no effect on a converge node; the note says why
  that does not change how the guest runs;
- **rejected**: a VM or VMI setting it is refused at admission by
  converge-controller's ` + "`converge-vm-validator`" + ` webhook (package
  ` + "`vmadmission`" + `), and a VMI that reaches a node anyway is marked Failed with
  a condition naming the field.

A field that is set and not in the table (and not below an ignored field, or
a supported field with no rows below it, which is taken whole) is refused
like a rejected one, with the reason "not supported by converge".

| Path | Support | Note |
|---|---|---|
`)
	for _, f := range rows {
		note := strings.ReplaceAll(f.Note, "|", `\|`)
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.Path, f.Support, note)
	}
	return b.Bytes()
}

// TestSupportDocUpToDate fails when docs/vmi-support.md differs from what
// SupportTable() gives; -update (or UPDATE_GOLDEN=1) rewrites it.
func TestSupportDocUpToDate(t *testing.T) {
	want := renderSupportDoc(vmisupport.SupportTable())
	if *update {
		if err := os.WriteFile(supportDoc, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(supportDoc)
	if err != nil {
		t.Fatalf("%s: %v (run go test ./api/vmisupport -run TestSupportDocUpToDate -update)", supportDoc, err)
	}
	if !bytes.Equal(got, want) {
		diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(want)), B: difflib.SplitLines(string(got)),
			FromFile: "SupportTable()", ToFile: filepath.Base(supportDoc), Context: 1})
		t.Errorf("%s is stale: run go test ./api/vmisupport -run TestSupportDocUpToDate -update\n%s", supportDoc, diff)
	}
}

// TestSupportDocRows checks the rendering itself: every table row appears
// once, with its support, and a "|" in a note cannot split a cell.
func TestSupportDocRows(t *testing.T) {
	doc := string(renderSupportDoc([]vmisupport.Field{
		{Path: "spec.a", Support: vmisupport.Supported, Note: "x | y"},
		{Path: "spec.b[*].c", Support: vmisupport.Rejected},
	}))
	for _, line := range []string{"| `spec.a` | supported | x \\| y |\n", "| `spec.b[*].c` | rejected |  |\n"} {
		if strings.Count(doc, line) != 1 {
			t.Errorf("the page has %d lines %q, want 1:\n%s", strings.Count(doc, line), line, doc)
		}
	}
	full := string(renderSupportDoc(vmisupport.SupportTable()))
	if n, want := strings.Count(full, "\n| `spec"), len(vmisupport.SupportTable()); n != want {
		t.Errorf("the page has %d rows, want one per SupportTable() row (%d)", n, want)
	}
}
