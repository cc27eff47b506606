package scale

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Size
		err      string
	}{
		{"sweep", "100/5, 250/10,500/25", []Size{{100, 5}, {250, 10}, {500, 25}}, ""},
		{"one", "1000/50", []Size{{1000, 50}}, ""},
		{"no slash", "100", nil, `entry 1 "100": want OBJECTS/HOSTS`},
		{"empty entry", "100/5,", nil, "entry 2"},
		{"zero hosts", "100/0", nil, `hosts "0", want a positive integer`},
		{"not a number", "many/5", nil, `objects "many"`},
		{"fewer objects than hosts", "4/5", nil, "fewer objects than hosts"},
		{"not growing", "250/10,100/5", nil, "want more than the previous entry's 250"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSizes("CONVERGE_SCALE_VMS", tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "CONVERGE_SCALE_VMS") {
					t.Fatalf("ParseSizes = %v, %v; want an error naming the variable and containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseSizes = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
