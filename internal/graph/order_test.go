package graph

import (
	"reflect"
	"strings"
	"testing"
)

func TestLevels(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deps    map[string][]string
		want    [][]string
		wantErr string
	}{
		{"converge's graph", map[string][]string{
			"hco": nil, "virt": {"hco"}, "cdi": {"hco"}, "cnao": {"hco"}, "ssp": {"virt", "cdi"}, "hpp": {"cdi"},
		}, [][]string{{"hco"}, {"cdi", "cnao", "virt"}, {"hpp", "ssp"}}, ""},
		{"a chain", map[string][]string{"a": {"b"}, "b": {"c"}, "c": nil}, [][]string{{"c"}, {"b"}, {"a"}}, ""},
		{"unknown dependency", map[string][]string{"a": {"zzz"}}, nil, `"a" depends on unknown component "zzz"`},
		{"cycle", map[string][]string{"a": {"b"}, "b": {"a"}, "c": nil}, nil, "dependency cycle among components a, b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Levels(tc.deps)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Levels = %v, want %v", got, tc.want)
			}
		})
	}
}
