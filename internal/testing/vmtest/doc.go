// Package vmtest holds what the VM tests on a real libvirtd and QEMU (TCG)
// share (the end-to-end tests in internal/e2e, the NIC tests of
// nodeplane/network/netattach): StartLibvirt runs virtlogd and
// libvirtd for one test through the product's supervisor
// (nodeplane/vm/libvirtd: converge's configuration, directories of the
// test's own, inside a network namespace of the test), BuildGuest builds the Debian guest of hack/guest, and BuildBinary
// builds converge-node. The tests run as root only; they skip otherwise,
// and fail instead when CONVERGE_REQUIRE_NODEPLANE=1 (CI) and something is
// missing. Setup recipe and pitfalls: shared notes, nodeplane.md §3 and §7.
package vmtest

import (
	"fmt"
	"os"
	"testing"
)

// RequireEnv is the environment variable that turns the package's skips
// into failures when set to "1".
const RequireEnv = "CONVERGE_REQUIRE_NODEPLANE"

// Require skips t with the message when ok is false, or fails it when
// RequireEnv is "1". The message should say what to install or run.
func Require(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1 is set)", msg, RequireEnv)
	}
	t.Skip(msg)
}
