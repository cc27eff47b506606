package synccontroller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestUnsettled(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	for _, c := range []struct {
		name   string
		failed []bool // a's applies in order
		want   bool
	}{
		{"never applied", nil, false},
		{"succeeded", []bool{false}, false},
		{"failed", []bool{true}, true},
		{"failed twice", []bool{true, true}, true},
		{"failed, then succeeded", []bool{true, false}, false},
		{"succeeded, then failed", []bool{false, true}, true},
	} {
		u := newUnsettled()
		u.applied(b, true) // another Sync's failure is not a's
		for _, f := range c.failed {
			u.applied(a, f)
		}
		if got := u.is(a); got != c.want {
			t.Errorf("%s: is(a) = %v, want %v", c.name, got, c.want)
		}
		if !u.is(b) {
			t.Errorf("%s: b's failure was forgotten", c.name)
		}
	}
}
