package scale

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/libvirt"
)

// simulatedCPUs is the CPU count each simulated node offers: at
// KubeVirt's cpuAllocationRatio 10 a VM asks for 0.1 CPU, so a node takes
// 640 of them, more than any sweep puts on one; memory is the host's
// (MemTotal less 256 MiB), each VM asks 64 MiB.
const simulatedCPUs = 64

// startNodes runs n simulated nodes named scale-node-<i> against cfg
// until the benchmark ends: for each, the VM agent as `converge-node vm
// --kubeconfig` runs it (APISource watching only its node's labelled
// VMIs, as virt-handler; RegisterNode and its heartbeat) on its own
// libvirt test driver connection (in-memory, domain type test).
func startNodes(b *testing.B, cfg *rest.Config, n int) {
	scheme := newScheme(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, n)
	b.Cleanup(func() {
		cancel()
		for range n {
			<-done
		}
	})
	started := 0
	defer func() {
		// a failed start leaves no goroutine the cleanup waits for
		for range n - started {
			done <- nil
		}
	}()
	for i := range n {
		name := fmt.Sprintf("scale-node-%d", i)
		conn, err := libvirt.OpenEmptyTestNode(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		aopts := agent.DefaultAPIOptions(name)
		aopts.LabelledOnly = true
		src, err := agent.NewAPISource(cfg, scheme, aopts)
		if err != nil {
			b.Fatal(err)
		}
		nopts := agent.DefaultNodeOptions(name)
		nopts.CPUs = simulatedCPUs
		if err := agent.RegisterNode(ctx, src.Client(), nopts); err != nil {
			b.Fatal(err)
		}
		go agent.KeepNodeRegistered(ctx, src.Client(), nopts, func(err error) { b.Logf("node %s heartbeat: %v", name, err) })
		if err := src.Start(ctx); err != nil {
			b.Fatal(err)
		}
		opts := agent.DefaultOptions(name)
		opts.Domain.DomainType, opts.Domain.Emulator = "test", "" // the test driver runs type 'test' and no QEMU
		opts.Domain.ResolveBridge = func(string, kubevirtv1.Network) (string, error) { return "cvbr0", nil }
		opts.DefaultGracePeriod = 0
		a := agent.New(conn, opts)
		started++
		go func() { done <- a.Run(ctx, src, time.Minute) }()
	}
}

// newScheme knows the client-go, kubevirt.io/v1 and cdi.kubevirt.io types
// (the agent's, as converge-node vm's).
func newScheme(b *testing.B) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme, cdiv1.AddToScheme} {
		if err := add(s); err != nil {
			b.Fatal(err)
		}
	}
	return s
}
