// Package e2e_test runs converge's two sides together on real parts: the
// API server and etcd, converge-controller and its operators, the converge
// CLI, and the node agents (converge-node vm with a real libvirtd and QEMU
// (TCG) guest, VM NICs on real CNI bridges; helpers in
// internal/testing/vmtest). Tests that need root or libvirtd skip without
// them and fail instead when CONVERGE_REQUIRE_NODEPLANE=1 (CI); tests that
// only check the contract between the sides (a registered Node is
// schedulable) need just the control plane binaries.
package e2e_test
