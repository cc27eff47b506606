package e2e_test

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// startAgentArgs is startAgent with extra flags for `converge-node vm`.
func startAgentArgs(t *testing.T, bin, vmiFile, stateDir string, l *vmtest.Libvirt, extra ...string) *agentProc {
	t.Helper()
	p := &agentProc{lines: make(chan string, 100), exited: make(chan struct{}), stderr: filepath.Join(t.TempDir(), "agent.log")}
	args := append([]string{"vm", "--vmi-file", vmiFile, "--libvirt-uri", l.URI, "--domain-type", "qemu",
		"--state-dir", stateDir, "--node-name", "e2e-node", "--resync", "5s"}, extra...)
	p.cmd = exec.Command(bin, args...)
	errf, err := os.Create(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = errf
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			p.lines <- s.Text()
		}
		close(p.lines)
		_ = p.cmd.Wait() // after the last read of the pipe, as exec requires
		_ = errf.Close()
		close(p.exited)
	}()
	t.Cleanup(func() { _ = p.stop(t) })
	return p
}

// awaitAll reads status lines until each of want was seen, in any order;
// it fails the test when the agent exits or guard passes first (a hang
// guard, not a timing assertion).
func (p *agentProc) awaitAll(t *testing.T, want []string, guard time.Duration) {
	t.Helper()
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	timer := time.NewTimer(guard)
	defer timer.Stop()
	var seen []string
	for len(missing) > 0 {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("converge-node vm exited before %q; status lines %q; log:\n%s", keys(missing), seen, tailFile(p.stderr))
			}
			t.Logf("agent: %s", line)
			delete(missing, line)
			seen = append(seen, line)
		case <-timer.C:
			t.Fatalf("no %q from converge-node vm within %s; status lines %q; log:\n%s", keys(missing), guard, seen, tailFile(p.stderr))
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// writeFile writes body to path, creating its directory.
func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// logHas reports whether the file at path contains s.
func logHas(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte(s))
}

// mustRun runs argv and gives its standard output; a failure fails the
// test with the command and its output.
func mustRun(t *testing.T, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s%s", strings.Join(argv, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

// hasNeighbour reports whether `ip neigh show` output has ip with lladdr
// mac.
func hasNeighbour(neigh, ip, mac string) bool {
	for _, l := range strings.Split(neigh, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == ip {
			for i := 1; i+1 < len(f); i++ {
				if f[i] == "lladdr" && strings.EqualFold(f[i+1], mac) {
					return true
				}
			}
		}
	}
	return false
}

// ipamReservations gives the addresses host-local holds under its
// dataDir (one file per reserved IP in <dataDir>/<network>/).
func ipamReservations(t *testing.T, dataDir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dataDir, func(path string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !d.IsDir() && net.ParseIP(d.Name()) != nil {
			out = append(out, d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("host-local data %s: %v", dataDir, err)
	}
	return out
}
