package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// sysctls are what this cluster changes on the host: ip_forward (the
// bridge plugin's isGateway turns it on) and the kernel tunables the
// kubelet sets at start (pkg/kubelet/cm setupKernelTunables, with
// protectKernelDefaults false). Start records them, Stop restores them.
var sysctls = []string{
	"net/ipv4/ip_forward",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// readSysctls reads the current values of sysctls.
func readSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, s := range sysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return nil, fmt.Errorf("cluster: reading sysctl %s: %w", s, err)
		}
		out[s] = strings.TrimSpace(string(b))
	}
	return out, nil
}

// restoreSysctls writes back the values saved by readSysctls.
func restoreSysctls(saved map[string]string) error {
	var errs []error
	for s, v := range saved {
		p := filepath.Join("/proc/sys", s)
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring sysctl %s=%s: %w", s, v, err))
		}
	}
	return errors.Join(errs...)
}

// ip runs the ip command and gives its combined output.
func ip(args ...string) ([]byte, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// nodeIPPresent reports whether NodeIP/32 is on lo.
func nodeIPPresent() bool {
	out, err := ip("-4", "-o", "addr", "show", "dev", "lo")
	return err == nil && bytes.Contains(out, []byte(" "+NodeIP+"/32 "))
}

// addNodeIP adds NodeIP/32 to lo (the kubelet and the apiserver refuse a
// loopback address, and there is no dummy link type on these machines).
func addNodeIP() error {
	if nodeIPPresent() {
		return nil
	}
	_, err := ip("addr", "add", NodeIP+"/32", "dev", "lo")
	return err
}

// removeNodeIP removes NodeIP/32 from lo when present.
func removeNodeIP() error {
	if !nodeIPPresent() {
		return nil
	}
	_, err := ip("addr", "del", NodeIP+"/32", "dev", "lo")
	return err
}

// linkExists reports whether a network link of that name exists.
func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// removeBridge deletes the pod bridge when present (the pods' veth ends
// go with their network namespaces).
func removeBridge() error {
	if !linkExists(BridgeName) {
		return nil
	}
	_, err := ip("link", "del", BridgeName)
	return err
}

// removeKubeChains deletes the KUBE-* chains (and the rules jumping to
// them) that the kubelet adds to the iptables filter, nat and mangle
// tables when an iptables binary exists; nothing to do without one.
func removeKubeChains() error {
	var errs []error
	for _, bin := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, err := exec.Command(bin, "-w", "-t", table, "-S").Output()
			if err != nil {
				continue // table not available
			}
			var chains []string
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) >= 2 && f[0] == "-N" && strings.HasPrefix(f[1], "KUBE-"):
					chains = append(chains, f[1])
				case len(f) >= 2 && f[0] == "-A" && strings.Contains(line, " -j KUBE-"):
					// A rule jumping to one of ours: delete it (-D with the rule's spec).
					args := append([]string{"-w", "-t", table, "-D"}, f[1:]...)
					if o, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
						errs = append(errs, fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, bytes.TrimSpace(o)))
					}
				}
			}
			for _, c := range chains {
				_ = exec.Command(bin, "-w", "-t", table, "-F", c).Run()
			}
			for _, c := range chains {
				if o, err := exec.Command(bin, "-w", "-t", table, "-X", c).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s -X %s: %w: %s", bin, table, c, err, bytes.TrimSpace(o)))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// removeProxyTables deletes the nftables tables kube-proxy's nftables
// mode programs ("kube-proxy" in the ip and ip6 families), as
// `kube-proxy --cleanup` does; a table that is not there is fine.
func removeProxyTables() error {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	var errs []error
	for _, family := range []string{"ip", "ip6"} {
		if exec.Command("nft", "list", "table", family, "kube-proxy").Run() != nil {
			continue // not there
		}
		if o, err := exec.Command("nft", "delete", "table", family, "kube-proxy").CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("nft delete table %s kube-proxy: %w: %s", family, err, bytes.TrimSpace(o)))
		}
	}
	return errors.Join(errs...)
}

// cniConflist is the pod network: a bridge with the gateway address on
// the host (so the host reaches pod IPs), no masquerading (no iptables),
// host-local addresses from PodCIDR with its leases under dataDir.
func cniConflist(dataDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`, NetworkName, BridgeName, dataDir, PodCIDR)
}
