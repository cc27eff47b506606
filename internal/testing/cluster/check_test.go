package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckNamesWhatIsMissing: with containerd, ctr, runc, gcc and nft
// missing from PATH and an empty bin directory, Check names the apt command and the
// make target of each missing piece.
func TestCheckNamesWhatIsMissing(t *testing.T) {
	path := t.TempDir()
	for _, c := range []string{"ip", "go"} {
		p, err := exec.LookPath(c)
		if err != nil {
			t.Skipf("%s not in PATH", c)
		}
		if err := os.Symlink(p, filepath.Join(path, c)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", path)
	bin := t.TempDir()
	err := Check(bin)
	if err == nil {
		t.Fatal("Check passed with nothing installed")
	}
	for _, want := range []string{
		"apt-get install -y containerd gcc nftables runc",
		"kubelet not in " + bin + ": run `make cluster-bins`",
		"kube-scheduler not in " + bin + ": run `make cluster-bins`",
		"kube-proxy not in " + bin + ": run `make cluster-bins`",
		"kube-apiserver not in " + bin + ": run `make controlplane`",
		"cni/bridge not in " + bin + ": run `make cni`",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check: %v\nwant it to say %q", err, want)
		}
	}
}
