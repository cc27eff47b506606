package virtapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/virtctltest"
)

// TestVirtctl drives a VM through start, restart and stop with the
// upstream virtctl binary (virtctltest) as a client-certificate user
// bound to kubevirt.io:edit, through the API server's aggregation layer to
// converge's virt-api and the VM controller: each command prints
// KubeVirt's line and the VM follows; KubeVirt's refusals reach the user
// with a non-zero exit, and a user without the role is forbidden.
func TestVirtctl(t *testing.T) {
	virtctltest.Path(t)
	cl := newCluster(t)
	ns := "default"
	kubeconfig := func(name, role string) string {
		b, err := cl.authUser(t, name, ns, role).KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), name+".kubeconfig")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	alice, bob := kubeconfig("alice", "kubevirt.io:edit"), kubeconfig("bob", "")
	cl.createVM(t, ns, "testvm", kubevirtv1.RunStrategyHalted)
	ok := func(r virtctltest.Result, line string) {
		t.Helper()
		if r.Code != 0 || !strings.Contains(r.Stdout, line) {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and %q", r.Code, r.Stdout, r.Stderr, line)
		}
	}
	refused := func(r virtctltest.Result, msg string) {
		t.Helper()
		if r.Code == 0 || !strings.Contains(r.Stderr, msg) {
			t.Fatalf("exit %d, stderr %q; want a failure naming %q", r.Code, r.Stderr, msg)
		}
	}

	ok(virtctltest.Run(t, alice, "start", "testvm", "-n", ns), "VM testvm was scheduled to start")
	if rs := *cl.vm(t, ns, "testvm").Spec.RunStrategy; rs != kubevirtv1.RunStrategyAlways {
		t.Errorf("after virtctl start: runStrategy %s, want Always", rs)
	}
	first := cl.running(t, ns, "testvm", "")
	r := virtctltest.Run(t, alice, "start", "testvm", "-n", ns)
	refused(r, "VM is already running")
	// on a failure virtctl reads the server's version (GET
	// /apis/subresources.kubevirt.io/v1/version) and compares it with its own
	// (v1.8 against the v1.9 API: it says so)
	if !strings.Contains(r.Stderr, "Server Version: v1.9") {
		t.Errorf("virtctl did not read the server's version: %s", r.Stderr)
	}

	ok(virtctltest.Run(t, alice, "restart", "testvm", "-n", ns), "VM testvm was scheduled to restart")
	second := cl.running(t, ns, "testvm", first)
	t.Logf("virtctl restart replaced VMI %s by %s", first, second)

	ok(virtctltest.Run(t, alice, "stop", "testvm", "-n", ns), "VM testvm was scheduled to stop")
	if rs := *cl.vm(t, ns, "testvm").Spec.RunStrategy; rs != kubevirtv1.RunStrategyHalted {
		t.Errorf("after virtctl stop: runStrategy %s, want Halted", rs)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return apierrors.IsNotFound(cl.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "testvm"}, &kubevirtv1.VirtualMachineInstance{}))
	})
	refused(virtctltest.Run(t, alice, "stop", "testvm", "-n", ns), "VM is not running")
	refused(virtctltest.Run(t, bob, "start", "testvm", "-n", ns), `User "bob" cannot update resource "virtualmachines/start"`)
	if rs := *cl.vm(t, ns, "testvm").Spec.RunStrategy; rs != kubevirtv1.RunStrategyHalted {
		t.Errorf("after bob's refused start: runStrategy %s, want Halted", rs)
	}
}
