package virtcontroller_test

import (
	"testing"
	"time"

	"github.com/converge-dev/converge/operators/virt/virtcontroller"
)

// TestDefaultOptions: the role's defaults, taken from its controllers'
// packages, are the documented ones.
func TestDefaultOptions(t *testing.T) {
	want := virtcontroller.Options{UnschedulableRetry: 30 * time.Second, CRDPoll: 5 * time.Second, HeartbeatTimeout: 5 * time.Minute, Concurrency: 4}
	got := virtcontroller.DefaultOptions()
	if got.Gate != nil || got.Ratios != nil {
		t.Error("DefaultOptions has a gate or ratios")
	}
	if got.UnschedulableRetry != want.UnschedulableRetry || got.CRDPoll != want.CRDPoll || got.HeartbeatTimeout != want.HeartbeatTimeout ||
		got.Concurrency != want.Concurrency || got.SkipNameValidation != want.SkipNameValidation {
		t.Errorf("DefaultOptions() = %+v, want %+v", got, want)
	}
}
