package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/nodeplane/network/netattach"
)

// TestPodNetworkFlags: the pod network is there when its configuration
// directory exists, with the runtime's plugin directory and a cache of
// its own; bridge-bound pod interfaces go through it unless --pod-bridge
// is set; no directory (or an empty flag) means no pod network, and no
// network setup at all without CNI bridge networks; an unreadable
// resolv.conf is refused at start.
func TestPodNetworkFlags(t *testing.T) {
	dir := t.TempDir()
	confDir, resolv := filepath.Join(dir, "net.d"), filepath.Join(dir, "resolv.conf")
	if err := os.Mkdir(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(resolv, []byte("nameserver 10.96.0.10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := func(conf, bridge, resolvConf string) *vmFlags {
		return &vmFlags{stateDir: dir, cniBinDir: "/opt/cni/bin", podBridge: bridge,
			podNet: podNetworkFlags{confDir: conf, binDir: "/host/opt/cni/bin", resolvConf: resolvConf}}
	}
	for _, tc := range []struct {
		name          string
		f             *vmFlags
		src           netattach.ConfigSource
		pod, bridging bool
		none          bool
	}{
		{"pod network", flags(confDir, "", resolv), nil, true, true, false},
		{"pod network and --pod-bridge", flags(confDir, "cvbr0", resolv), nil, true, false, false},
		{"no directory", flags(filepath.Join(dir, "missing"), "", resolv), nil, false, false, true},
		{"empty flag", flags("", "", resolv), nil, false, false, true},
		{"empty flag, bridge networks", flags("", "", resolv), netattach.DirSource{Dir: dir}, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, err := podNetworks(tc.f, tc.src, logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			if tc.none {
				if ns != nil {
					t.Fatalf("network setup %+v, want none", ns)
				}
				return
			}
			v := ns.(*netattach.VMINetworks)
			if (v.Pod != nil) != tc.pod {
				t.Fatalf("pod network %+v, want %v", v.Pod, tc.pod)
			}
			if v.Pod != nil && (v.Pod.BridgeBinding != tc.bridging || v.Pod.Network.ConfDir != confDir || v.ResolvConf != resolv) {
				t.Errorf("pod network %+v, resolv.conf %s", v.Pod, v.ResolvConf)
			}
		})
	}
	_, err := podNetworks(flags(confDir, "", filepath.Join(dir, "none.conf")), nil, logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "--pod-network-resolv-conf") {
		t.Errorf("missing resolv.conf: %v", err)
	}
}
