package netattach_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-dev/converge/nodeplane/network/netattach"
)

// TestPodNetworkLoad picks the pod network's configuration as the
// runtime does and refuses what the agent cannot run as the runtime
// would: the first file in lexical order (a .conf made a list), or the
// one named; a broken file, Multus' configuration, an empty directory,
// and a host-local lease directory the agent does not share.
func TestPodNetworkLoad(t *testing.T) {
	leases := t.TempDir()
	conflist := func(name, dataDir string) string {
		return `{"cniVersion":"1.0.0","name":"` + name + `","plugins":[{"type":"bridge","bridge":"cni0","ipam":{"type":"host-local","dataDir":"` + dataDir + `","ranges":[[{"subnet":"10.244.0.0/24"}]]}},{"type":"portmap","capabilities":{"portMappings":true}}]}`
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		pick  string
		want  string // network name, or the error
		err   bool
	}{
		{"first in lexical order", map[string]string{"20-b.conflist": conflist("b", leases+"/b"), "10-a.conflist": conflist("a", leases+"/a")}, "", "a", false},
		{"a single plugin .conf", map[string]string{"10-one.conf": `{"cniVersion":"1.0.0","name":"one","type":"ptp","ipam":{"type":"static"}}`}, "", "one", false},
		{"by name", map[string]string{"10-a.conflist": conflist("a", leases+"/a"), "20-b.conflist": conflist("b", leases+"/b")}, "b", "b", false},
		{"name not found", map[string]string{"10-a.conflist": conflist("a", leases+"/a")}, "k8s-pod-network", `no pod network configuration named "k8s-pod-network" in`, true},
		{"broken file", map[string]string{"10-a.conflist": `{"name":`}, "", "10-a.conflist", true},
		{"multus", map[string]string{"00-multus.conf": `{"cniVersion":"1.0.0","name":"multus-cni-network","type":"multus-shim"}`, "10-a.conflist": conflist("a", leases+"/a")}, "",
			"is Multus' configuration (type multus-shim), which looks the pod up in the API, and a VMI has no pod: name the cluster network Multus delegates to (converge-node vm --pod-network-name)", true},
		{"multus skipped by name", map[string]string{"00-multus.conf": `{"cniVersion":"1.0.0","name":"multus-cni-network","type":"multus"}`, "10-a.conflist": conflist("a", leases+"/a")}, "a", "a", false},
		{"empty", map[string]string{"README": "x"}, "", "no pod network configuration in", true},
		{"lease directory not shared", map[string]string{"10-a.conflist": conflist("a", "/nonexistent-converge/leases")}, "",
			"plugins[0]: host-local's lease directory /nonexistent-converge/leases: /nonexistent-converge is missing here: the agent must see the container runtime's leases at the same path", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			list, file, err := netattach.PodNetwork{ConfDir: dir, Name: tc.pick}.Load()
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				if tc.name == "empty" && !errors.Is(err, netattach.ErrNoPodNetwork) {
					t.Errorf("error %v does not wrap ErrNoPodNetwork", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if list.Name != tc.want || !strings.HasPrefix(file, dir) {
				t.Errorf("network %q from %s, want %q", list.Name, file, tc.want)
			}
		})
	}
	_, _, err := netattach.PodNetwork{ConfDir: filepath.Join(t.TempDir(), "missing")}.Load()
	if !errors.Is(err, netattach.ErrNoPodNetwork) {
		t.Errorf("missing directory: %v, want ErrNoPodNetwork", err)
	}
}
