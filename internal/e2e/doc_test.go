// Package e2e_test runs converge end to end on real parts: the API server
// and etcd, converge-controller, the converge CLI, converge-node vm with a
// real libvirtd and QEMU (TCG) guest, and VM NICs on real CNI bridges
// (helpers in internal/testing/vmtest). The tests run as root only; they
// skip otherwise, and fail instead when CONVERGE_REQUIRE_NODEPLANE=1 (CI).
package e2e_test
