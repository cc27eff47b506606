package crdgen

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestLargeStructKeepsFieldConstraints checks that a struct too large to
// hand to the encoder whole (tooLargeToEncode) gets, field by field, the
// same schema as the same fields in a small struct.
func TestLargeStructKeepsFieldConstraints(t *testing.T) {
	fields := []string{
		`p?: =~"^[a-z]+$"`,
		`n?: int & >=1 & <=9`,
		`e?: "a" | "b"`,
		`d: *3 | int`,
		`q?: int | =~"^[0-9]+$"`,
		`l?: [...{x?: string & !="", y?: int32}]`,
		`m?: [string]: int64`,
	}
	var big strings.Builder
	big.WriteString("#R: spec: {\n" + strings.Join(fields, "\n") + "\n")
	for i := 0; i <= maxEncodeFields; i++ {
		fmt.Fprintf(&big, "pad%d?: string\n", i)
	}
	big.WriteString("}\n")
	small := "#R: spec: {\n" + strings.Join(fields, "\n") + "\n}\n"

	bigV := compile(t, big.String(), "#R")
	if !tooLargeToEncode(bigV) {
		t.Fatalf("a struct with %d fields is not too large to encode", maxEncodeFields+len(fields))
	}
	if tooLargeToEncode(compile(t, "#R: {a?: string, b?: int}", "#R")) {
		t.Fatalf("a struct with 2 fields is too large to encode")
	}
	bs, err := Schema(bigV)
	if err != nil {
		t.Fatal(err)
	}
	assertStructural(t, bs)
	ss, err := Schema(compile(t, small, "#R"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"p", "n", "e", "d", "q", "l", "m"} {
		b, s := at(t, bs, "spec", f), at(t, ss, "spec", f)
		if !reflect.DeepEqual(b, s) {
			t.Errorf("field %s: large struct gives %s, small struct %s", f, dump(b), dump(s))
		}
	}
	wantNum(t, "n.minimum", at(t, bs, "spec", "n").Minimum, 1)
	if p := at(t, bs, "spec", "p"); p.Pattern != "^[a-z]+$" {
		t.Errorf("p: pattern lost: %s", dump(p))
	}
	wantEnum(t, at(t, bs, "spec", "e"), `"a"`, `"b"`)
	wantDefault(t, at(t, bs, "spec", "d"), "3")
	if !reflect.DeepEqual(at(t, bs, "spec").Required, at(t, ss, "spec").Required) {
		t.Errorf("required: large %v, small %v", at(t, bs, "spec").Required, at(t, ss, "spec").Required)
	}
}
