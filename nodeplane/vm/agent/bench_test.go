package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

func benchVMI(name string) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name = "bench", name
	vmi.UID = types.UID(uuid.NewSHA1(uuid.NameSpaceOID, []byte("bench/"+name)).String()) // the domain's UUID
	q := resource.MustParse("64Mi")
	grace := int64(0)
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	vmi.Spec.TerminationGracePeriodSeconds = &grace
	return vmi
}

// BenchmarkVMIToRunning measures, per iteration on libvirt's test driver
// (no daemon, no root), the time from a VMI served to a running agent
// (StaticSource.Add, which wakes Agent.Run) until the agent stores its
// report with phase Running: the domain XML built, defined and started,
// and the status computed. Next to it, in the same run, the floor: the
// same domain XML (domain.Build with the agent's options, built outside
// the timing) defined and started directly through the libvirt package.
// Metrics: agent-ns/op, floor-ns/op and x-floor (their ratio); ns/op is
// their sum (cleanup is not timed: each VMI is deleted, grace 0: destroy,
// undefine, Removed, before the next). The floor's domain has no converge
// metadata, so the running agent leaves it alone.
func BenchmarkVMIToRunning(b *testing.B) {
	hv := privateNode(b)
	opts := agent.DefaultOptions("bench-node")
	opts.Domain.DomainType, opts.Domain.Emulator = "test", ""
	opts.DefaultGracePeriod = 0
	src := agent.NewStaticSource()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.New(hv, opts).Run(ctx, src, time.Minute) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	// waitReport drains src.Stored until a report of name matches.
	waitReport := func(name string, ok func(agent.Report) bool) {
		timeout := time.After(30 * time.Second)
		for {
			select {
			case r := <-src.Stored():
				if r.Name == name && ok(r) {
					return
				}
			case <-timeout:
				b.Fatalf("VMI bench/%s: no matching report within 30 s", name)
			case err := <-done:
				b.Fatalf("agent Run ended: %v", err)
			}
		}
	}
	var agentTime, floorTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("vm-%d", i)
		vmi := benchVMI(name)
		start := time.Now()
		src.Add(vmi)
		waitReport(name, func(r agent.Report) bool { return r.Status.Phase == kubevirtv1.Running })
		agentTime += time.Since(start)

		b.StopTimer()
		floor := benchVMI("floor-" + name)
		x, err := domain.Build(floor, opts.Domain)
		if err != nil {
			b.Fatal(err)
		}
		x.Metadata = nil // not converge's: no orphan for the agent
		xml, err := x.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		dn := domain.Name(floor.Namespace, floor.Name)
		b.StartTimer()
		start = time.Now()
		if err := hv.Define(xml); err != nil {
			b.Fatal(err)
		}
		if err := hv.Start(dn); err != nil {
			b.Fatal(err)
		}
		floorTime += time.Since(start)

		b.StopTimer()
		if err := hv.Destroy(dn); err != nil {
			b.Fatal(err)
		}
		if err := hv.Undefine(dn); err != nil {
			b.Fatal(err)
		}
		src.Delete(vmi.Namespace, name, time.Now())
		waitReport(name, func(r agent.Report) bool { return r.Removed })
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(agentTime.Nanoseconds())/n, "agent-ns/op")
	b.ReportMetric(float64(floorTime.Nanoseconds())/n, "floor-ns/op")
	if floorTime > 0 {
		b.ReportMetric(float64(agentTime)/float64(floorTime), "x-floor")
	}
}
