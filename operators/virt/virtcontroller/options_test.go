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
	if got := virtcontroller.DefaultOptions(); got != want {
		t.Errorf("DefaultOptions() = %+v, want %+v", got, want)
	}
}
