package libvirt_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

// TestOpenConsoleErrors checks that OpenConsole names the domain and
// reports a missing one as hypervisor.ErrNotFound, and that a domain whose
// driver has no console (the test driver) is an error, not a reader that
// never returns. The working path is exercised against a real guest by
// internal/e2e.
func TestOpenConsoleErrors(t *testing.T) {
	c := emptyNode(t)
	_, err := c.OpenConsole("ns_missing")
	if !errors.Is(err, hypervisor.ErrNotFound) || !strings.Contains(err.Error(), "ns_missing") {
		t.Fatalf("OpenConsole(missing) = %v, want ErrNotFound naming the domain", err)
	}
	if err := c.Define(testDomainXML(t, "con")); err != nil {
		t.Fatal(err)
	}
	if err := c.Start("ns_con"); err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenConsole("ns_con")
	if err == nil {
		_ = r.Close()
		t.Fatal("OpenConsole on the test driver succeeded; expected it to be unsupported")
	}
	if !strings.Contains(err.Error(), "ns_con") {
		t.Fatalf("OpenConsole error %q does not name the domain", err)
	}
	t.Logf("test driver: %v", err)
}
