package scheduler_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/internal/virttest"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

// BenchmarkSchedule measures one decision (Schedule) on 50 nodes against
// a growing number of placed VMIs (issue 18): its cost per op grows with
// the placed count as long as Schedule sums the placements on every call.
// Compare the sub-benchmarks' ns/op as ratios against placed=100.
func BenchmarkSchedule(b *testing.B) {
	const nodeCount = 50
	var nodes []corev1.Node
	for i := range nodeCount {
		nodes = append(nodes, virttest.Node(fmt.Sprintf("n%02d", i), "1000", "4000Gi", nil))
	}
	vmi := virttest.VMISpec("1Gi", nil)
	requests := scheduler.Requests(vmi, nil)
	for _, n := range []int{100, 1000, 10000} {
		placed := make([]scheduler.Placed, n)
		for i := range placed {
			placed[i] = scheduler.Placed{Node: nodes[i%nodeCount].Name, Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
		}
		b.Run(fmt.Sprintf("placed=%d", n), func(b *testing.B) {
			for b.Loop() {
				if d := scheduler.Schedule(vmi, requests, nodes, placed); d.Node == "" {
					b.Fatalf("no node: %s", d.Message)
				}
			}
		})
	}
}
