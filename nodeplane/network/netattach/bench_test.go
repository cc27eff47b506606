package netattach_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/converge-dev/converge/nodeplane/network/netattach"
)

// BenchmarkAddDel measures one CNI ADD + DEL of a bridge network with
// host-local IPAM into a fresh sandbox namespace, through netattach
// (libcni: config injection, result cache) and by exec'ing the bridge
// plugin binary directly with the same configuration (the floor); the
// ratio is logged. Run as root: make bench runs
// go test -run '^$' -bench AddDel -benchtime 50x ./nodeplane/network/netattach/
func BenchmarkAddDel(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root (network namespaces)")
	}
	bin := filepath.Join(repoRoot(b), "bin", "cni")
	if _, err := os.Stat(filepath.Join(bin, "bridge")); err != nil {
		b.Skipf("no CNI plugins in %s: make cni", bin)
	}
	id := os.Getpid() % 100000
	host, err := netattach.EnsureNetns(fmt.Sprintf("cvb-h-%d", id))
	if err != nil {
		b.Fatal(err)
	}
	defer netattach.DeleteNetns(fmt.Sprintf("cvb-h-%d", id))
	sandboxName := fmt.Sprintf("cvb-s-%d", id)
	sandbox, err := netattach.EnsureNetns(sandboxName)
	if err != nil {
		b.Fatal(err)
	}
	defer netattach.DeleteNetns(sandboxName)
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"bench","type":"bridge","bridge":"cvbench0","mtu":1400,
 "ipam":{"type":"host-local","ranges":[[{"subnet":"10.99.9.0/24"}]],"dataDir":%q}}`, b.TempDir())
	list, _, err := netattach.ParseConfig("bench", []byte(conf))
	if err != nil {
		b.Fatal(err)
	}
	var perOp [2]time.Duration
	b.Run("netattach", func(b *testing.B) {
		opts := netattach.DefaultOptions()
		opts.BinDirs, opts.CacheDir, opts.HostNetns = []string{bin}, b.TempDir(), host
		att, err := netattach.NewAttacher(opts)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := 0; i < b.N; i++ {
			ep := netattach.Endpoint{ContainerID: fmt.Sprintf("bench-%d", i), Netns: sandbox, IfName: "net1", MAC: "02:00:00:00:09:01", PodNamespace: "ns", PodName: "vm"}
			if _, err := att.Add(b.Context(), list, ep); err != nil {
				b.Fatal(err)
			}
			if err := att.Del(b.Context(), ep.ContainerID); err != nil {
				b.Fatal(err)
			}
		}
		perOp[0] = time.Since(start) / time.Duration(b.N)
	})
	b.Run("plugin-binary", func(b *testing.B) {
		start := time.Now()
		for i := 0; i < b.N; i++ {
			for _, cmd := range []string{"ADD", "DEL"} {
				c := exec.Command("nsenter", "--net="+host, filepath.Join(bin, "bridge"))
				c.Env = []string{"CNI_COMMAND=" + cmd, fmt.Sprintf("CNI_CONTAINERID=bench-%d", i), "CNI_NETNS=" + sandbox, "CNI_IFNAME=net1",
					"CNI_PATH=" + bin, "CNI_ARGS=IgnoreUnknown=true;MAC=02:00:00:00:09:01"}
				c.Stdin = bytes.NewReader([]byte(conf))
				if out, err := c.CombinedOutput(); err != nil {
					b.Fatalf("bridge %s: %v: %s", cmd, err, out)
				}
			}
		}
		perOp[1] = time.Since(start) / time.Duration(b.N)
	})
	if perOp[0] > 0 && perOp[1] > 0 {
		b.Logf("ADD+DEL: netattach %s, plugin binary %s (incl. nsenter), ratio %.2f", perOp[0], perOp[1], float64(perOp[0])/float64(perOp[1]))
	}
}

// repoRoot finds converge's go.mod above the working directory.
func repoRoot(b *testing.B) string {
	dir, _ := os.Getwd()
	for {
		if m, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(m, []byte("module github.com/converge-dev/converge\n")) {
			return dir
		}
		if filepath.Dir(dir) == dir {
			b.Fatal("no converge go.mod above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}
