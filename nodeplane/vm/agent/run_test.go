package agent_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

// queuedEvents is the test driver with an Events channel of its own,
// filled by the test, and a count of the passes (one List each).
type queuedEvents struct {
	hypervisor.Hypervisor
	events chan hypervisor.Event
	passes atomic.Int32
}

func (q *queuedEvents) Events(context.Context) (<-chan hypervisor.Event, error) {
	return q.events, nil
}

func (q *queuedEvents) List() ([]hypervisor.Domain, error) {
	q.passes.Add(1)
	return q.Hypervisor.List()
}

// TestRunOnePassForQueuedEvents: events queued while the agent was busy
// lead to one pass, not one each; when the channel closes behind them,
// Run returns.
func TestRunOnePassForQueuedEvents(t *testing.T) {
	for _, closed := range []bool{false, true} {
		hv := &queuedEvents{Hypervisor: privateNode(t), events: make(chan hypervisor.Event, 16)}
		for range 10 {
			hv.events <- hypervisor.Event{Name: "ns_x", Type: "Started"}
		}
		hv.events <- hypervisor.Event{Type: hypervisor.EventReconnected}
		if closed {
			close(hv.events)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- agent.New(hv, options(&clock{})).Run(ctx, agent.NewStaticSource(), 0) }()
		want := int32(2) // the first pass, one for the 11 events
		if closed {
			want = 1 // the first pass, then the channel's end
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run went on after the events channel closed")
			}
		} else {
			time.Sleep(200 * time.Millisecond) // time for the passes one per event would take
		}
		if got := hv.passes.Load(); got != want {
			t.Errorf("closed %v: %d passes, want %d", closed, got, want)
		}
		cancel()
		if !closed {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
}
