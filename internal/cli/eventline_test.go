package cli

import "testing"

func TestEventLine(t *testing.T) {
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"head only", "Applied revision main@sha1:1111", "Applied revision main@sha1:1111"},
		{"spaces folded", "Applied  revision\tx ", "Applied revision x"},
		{"few changes", "Applied revision r\nKubeVirt/ns/kv configured\nHyperConverged/ns/hc configured",
			"Applied revision r: KubeVirt/ns/kv configured; HyperConverged/ns/hc configured"},
		{"many changes", "Revision r: waiting\nA/a created\nB/b created\nC/c created\nD/d created\nE/e created",
			"Revision r: waiting: A/a created; B/b created; C/c created (+2 more)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := eventLine(tc.msg, 3); got != tc.want {
				t.Errorf("eventLine(%q)\n got %q\nwant %q", tc.msg, got, tc.want)
			}
		})
	}
}
