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
//   - BenchmarkSyncScale: Syncs of testdata/example, each driving its own
//     remote target cluster (a kube-apiserver+etcd on loopback, through a
//     kubeconfig Secret), converge-controller as a process: first-sync and
//     no-op reconcile throughput, API requests per Sync and no-op, the
//     controller's RSS. One Sync per target: a Sync drives one
//     HyperConverged, and Syncs sharing a cluster would fight over its CRDs
//     and other cluster-scoped objects (their owner labels), so the issue's
//     100 Syncs over 10 targets is not a configuration converge has.
//
// Sizes is the sweep's pure logic (parsed from the environment); the
// benchmarks are in the package's tests.
package scale
