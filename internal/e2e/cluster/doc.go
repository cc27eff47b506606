// Package cluster runs converge as a user runs it, on the machine's real
// single-node cluster (internal/testing/cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, containerd, a CNI
// bridge), from the images this repository builds (internal/images).
//
// Start builds the converge CLI, converge-controller and converge-node
// with one version (Options.Version, set with -ldflags -X as `make build`
// does, images.LDFlags), builds the converge-controller and converge-node
// image archives for that version with images.Build (the Debian packages
// cached in bin/images/apt, the archives in bin/images/e2e, left as they
// are while their inputs do not change, so a warm run builds nothing),
// starts the cluster and imports both images into its containerd. The Env
// it gives runs the built CLI against the cluster's admin kubeconfig
// (Env.Converge) and holds clients of the cluster.
//
// The tests of this package share one Env (Shared, stopped by Main from
// TestMain): the cluster is one per machine, and its start and the image
// import cost seconds each. Shared skips a test when the cluster or the
// images cannot be made here (not root, containerd, runc, apt, libvirt-dev
// or a binary of bin/ missing, the Debian mirror unreachable), or fails it
// when CONVERGE_REQUIRE_NODEPLANE=1 (CI), as cluster.StartForTest does.
// Benchmarks start their own with StartForBench.
//
// Pods reach the host at the node address (cluster.NodeIP): a Git server
// the in-cluster converge-controller fetches from listens there
// (gitserver.HTTPOptions.Addr).
//
// Nothing shipped links this package: it is test support.
package cluster
