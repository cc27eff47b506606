// Package scale measures converge at scale by simulation on one machine
// (issue 18), with `make bench-scale`:
//
//   - BenchmarkVMScale: VirtualMachines across simulated nodes on one real
//     kube-apiserver. converge-controller runs as its own process built
//     from cmd/converge-controller (its virt operator starts the
//     virt-controller role — VM controller, VMI scheduler, node health —
//     once a native KubeVirt CR exists); each simulated node is the real
//     VM agent (nodeplane/vm/agent: its APISource, Node registration and
//     heartbeat) on its own in-memory libvirt test driver connection, all
//     in the benchmark's process. Per size: creation → all VMIs Running,
//     VMs/s, the scheduler's binding rate, per-VM p50/p99 latency and the
//     controller's CPU seconds and peak RSS; PNG curves of each vs size.
//
// Sizes is the sweep's pure logic (parsed from the environment); the
// benchmarks are in the package's tests.
package scale
