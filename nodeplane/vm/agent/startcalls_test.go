package agent_test

import (
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

// countedCalls is the test driver with a count of the calls that read or
// change domains.
type countedCalls struct {
	hypervisor.Hypervisor
	calls map[string]int
}

func (c *countedCalls) List() ([]hypervisor.Domain, error) {
	c.calls["List"]++
	return c.Hypervisor.List()
}

func (c *countedCalls) Lookup(name string) (hypervisor.Domain, error) {
	c.calls["Lookup"]++
	return c.Hypervisor.Lookup(name)
}

func (c *countedCalls) Define(xml string) error {
	c.calls["Define"]++
	return c.Hypervisor.Define(xml)
}

func (c *countedCalls) Start(name string) error {
	c.calls["Start"]++
	return c.Hypervisor.Start(name)
}

// TestStartCalls: the pass that takes a new VMI to Running lists the
// domains once, defines and starts the domain, and reads it once, after
// the start (for the status from the running domain).
func TestStartCalls(t *testing.T) {
	hv := &countedCalls{Hypervisor: privateNode(t), calls: map[string]int{}}
	a := agent.New(hv, options(&clock{t: time.Unix(1000, 0)}))
	res := a.Reconcile([]*kubevirtv1.VirtualMachineInstance{newVMI("web", 30)})
	if len(res.Reports) != 1 || res.Reports[0].Status.Phase != kubevirtv1.Running || len(res.Errors) != 0 {
		t.Fatalf("result %+v, want one report, Running", res)
	}
	if st := res.Reports[0].Status; st.Machine == nil || st.Machine.Type != "q35" || len(st.Interfaces) != 1 {
		t.Errorf("machine %+v, interfaces %+v: not read from the running domain", st.Machine, st.Interfaces)
	}
	want := map[string]int{"List": 1, "Define": 1, "Start": 1, "Lookup": 1}
	for op, n := range want {
		if hv.calls[op] != n {
			t.Errorf("%s called %d times, want %d (all calls: %v)", op, hv.calls[op], n, hv.calls)
		}
	}
}
