package domain_test

import (
	"fmt"
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// nicVMI is a VMI with the given interfaces and networks YAML (each
// block indented for its place; empty: none).
func nicVMI(t *testing.T, devices, networks string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	doc := `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm1
  namespace: ns
  uid: 6d1f3a52-0b7e-4c1e-9a55-3f0c2b9d1e09
spec:
  domain:
    memory:
      guest: 128Mi
    devices:
` + devices + networks
	vmi, err := domain.DecodeVMI([]byte(doc))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return vmi
}

// nicOptions are a node's: with podNetwork, the pod network resolves to
// the tap cvt6d1f3a52-0 with MTU 1450 (as the agent's network setup
// does), multus networks to br-<name>, and --pod-bridge is cvbr0 when
// podBridge.
func nicOptions(podNetwork, podBridge bool) domain.Options {
	o := domain.DefaultOptions()
	o.ResolveBridge = func(_ string, n kubevirtv1.Network) (string, error) {
		switch {
		case n.Multus != nil:
			return "br-" + n.Multus.NetworkName, nil
		case podBridge:
			return "cvbr0", nil
		}
		return "", fmt.Errorf("this node has no pod bridge")
	}
	if podNetwork {
		o.ResolveTap = func(_ string, n kubevirtv1.Network) (domain.Tap, bool, error) {
			return domain.Tap{Name: "cvt6d1f3a52-0", MTU: 1450}, n.Pod != nil, nil
		}
	}
	return o
}

func nics(d *libvirtxml.Domain) []string {
	var out []string
	for _, i := range d.Devices.Interfaces {
		s := i.Alias.Name + " " + i.MAC.Address + " " + i.Model.Type
		switch {
		case i.Source.Ethernet != nil:
			s += fmt.Sprintf(" tap %s mtu %d", i.Target.Dev, i.MTU.Size)
		case i.Source.Bridge != nil:
			s += " bridge " + i.Source.Bridge.Bridge
		}
		out = append(out, s)
	}
	return out
}

// TestPodInterfaceDefault: a VMI without interfaces and networks gets
// KubeVirt's default (masquerade on the pod network, a tap) on a node
// with a pod network, nothing with autoattachPodInterface: false or on
// a node without one; true there is refused.
func TestPodInterfaceDefault(t *testing.T) {
	mac := domain.MAC("6d1f3a52-0b7e-4c1e-9a55-3f0c2b9d1e09", "default")
	for _, tc := range []struct {
		name       string
		devices    string
		podNetwork bool
		want       []string
		err        string
	}{
		{"pod network", "", true, []string{"ua-default " + mac + " virtio tap cvt6d1f3a52-0 mtu 1450"}, ""},
		{"opted out", "      autoattachPodInterface: false\n", true, nil, ""},
		{"asked explicitly", "      autoattachPodInterface: true\n", true, []string{"ua-default " + mac + " virtio tap cvt6d1f3a52-0 mtu 1450"}, ""},
		{"no pod network", "", false, nil, ""},
		{"no pod network, asked explicitly", "      autoattachPodInterface: true\n", false, nil,
			"spec.domain.devices.autoattachPodInterface: true: KubeVirt would attach the pod network with masquerade, and this node has no pod network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := nicVMI(t, tc.devices, "")
			d, err := domain.Build(vmi, nicOptions(tc.podNetwork, false))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := nics(d); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("NICs %q, want %q", got, tc.want)
			}
			if len(vmi.Spec.Domain.Devices.Interfaces) != 0 || len(vmi.Spec.Networks) != 0 {
				t.Errorf("Build changed the VMI: %+v %+v", vmi.Spec.Domain.Devices.Interfaces, vmi.Spec.Networks)
			}
		})
	}
	ifaces, nets, ok := domain.PodInterfaceDefault(&nicVMI(t, "", "").Spec)
	if !ok || len(ifaces) != 1 || ifaces[0].Masquerade == nil || ifaces[0].Name != "default" || len(nets) != 1 || nets[0].Pod == nil || nets[0].Name != "default" {
		t.Errorf("PodInterfaceDefault: %+v %+v %v", ifaces, nets, ok)
	}
}

// TestMasqueradeAndPorts: a masquerade NIC with ports, port ranges and
// a VM network is a tap of the pod network; bridge on the pod network
// goes to the node bridge with --pod-bridge, else to the tap.
func TestMasqueradeAndPorts(t *testing.T) {
	for _, tc := range []struct {
		name               string
		devices, networks  string
		podNetwork, bridge bool
		want               []string
	}{
		{"masquerade with ports", `      interfaces:
        - name: default
          masquerade: {}
          macAddress: 02:00:00:00:00:01
          ports:
            - name: http
              port: 80
            - port: 53
              protocol: UDP
`, "  networks:\n    - name: default\n      pod:\n        vmNetworkCIDR: 192.168.77.0/28\n", true, false,
			[]string{"ua-default 02:00:00:00:00:01 virtio tap cvt6d1f3a52-0 mtu 1450"}},
		{"masquerade with port ranges", `      interfaces:
        - name: default
          masquerade: {}
          portRanges:
            - {protocol: TCP, start: 8000, end: 8010}
            - {protocol: TCP, start: 9000, end: 9000}
            - {protocol: UDP, start: 8000, end: 8010}
`, "  networks:\n    - name: default\n      pod: {}\n", true, false,
			[]string{"ua-default " + domain.MAC("6d1f3a52-0b7e-4c1e-9a55-3f0c2b9d1e09", "default") + " virtio tap cvt6d1f3a52-0 mtu 1450"}},
		{"bridge on the pod network, --pod-bridge", "      interfaces:\n        - name: default\n          bridge: {}\n", "  networks:\n    - name: default\n      pod: {}\n", true, true,
			[]string{"ua-default " + domain.MAC("6d1f3a52-0b7e-4c1e-9a55-3f0c2b9d1e09", "default") + " virtio tap cvt6d1f3a52-0 mtu 1450"}},
		{"bridge on the pod network, no pod network", "      interfaces:\n        - name: default\n          bridge: {}\n", "  networks:\n    - name: default\n      pod: {}\n", false, true,
			[]string{"ua-default " + domain.MAC("6d1f3a52-0b7e-4c1e-9a55-3f0c2b9d1e09", "default") + " virtio bridge cvbr0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := domain.Build(nicVMI(t, tc.devices, tc.networks), nicOptions(tc.podNetwork, tc.bridge))
			if err != nil {
				t.Fatal(err)
			}
			if got := nics(d); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("NICs %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInterfaceRefusals: every value converge cannot honour is named by
// its path, with KubeVirt's rules where KubeVirt has one.
func TestInterfaceRefusals(t *testing.T) {
	pod := "  networks:\n    - name: default\n      pod: {}\n"
	masq := func(extra string) string {
		return "      interfaces:\n        - name: default\n          masquerade: {}\n" + extra
	}
	for _, tc := range []struct {
		name, devices, networks string
		podNetwork              bool
		want                    []string
	}{
		{"masquerade on multus", "      interfaces:\n        - name: lan\n          masquerade: {}\n", "  networks:\n    - name: lan\n      multus:\n        networkName: lan\n", true,
			[]string{`spec.domain.devices.interfaces[0].masquerade: the masquerade binding needs the pod network, as in KubeVirt, and network "lan" is not it`}},
		{"masquerade without pod network", masq(""), pod, false,
			[]string{"spec.domain.devices.interfaces[0].masquerade: this node has no pod network to masquerade behind"}},
		{"reserved MAC", masq("          macAddress: 02:00:00:00:00:00\n"), pod, true,
			[]string{"spec.domain.devices.interfaces[0].macAddress: 02:00:00:00:00:00 is reserved for the masquerade bridge"}},
		{"bad ports", masq(`          ports:
            - {name: web, port: 0}
            - {name: web, port: 80, protocol: SCTP}
            - {name: Bad_Name, port: 70000}
`), pod, true, []string{
			"spec.domain.devices.interfaces[0].ports[0].port: 0: expected 1 to 65535",
			`spec.domain.devices.interfaces[0].ports[1].name: "web" is given twice`,
			`spec.domain.devices.interfaces[0].ports[1].protocol: "SCTP": expected TCP or UDP`,
			`spec.domain.devices.interfaces[0].ports[2].name: "Bad_Name": expected an IANA service name`,
			"spec.domain.devices.interfaces[0].ports[2].port: 70000: expected 1 to 65535"}},
		{"ports on multus", "      interfaces:\n        - name: lan\n          bridge: {}\n          ports:\n            - port: 0\n", "  networks:\n    - name: lan\n      multus:\n        networkName: lan\n", true,
			[]string{"spec.domain.devices.interfaces[0].ports[0].port: 0: expected 1 to 65535"}},
		{"port ranges", masq(`          ports:
            - port: 80
          portRanges:
            - {protocol: TCP, start: 100, end: 200}
            - {protocol: TCP, start: 150, end: 160}
            - {protocol: TCP, start: 300, end: 299}
            - {protocol: ICMP, start: 1, end: 2}
`), pod, true, []string{
			"spec.domain.devices.interfaces[0].portRanges: set ports or portRanges, not both",
			"spec.domain.devices.interfaces[0].portRanges[1]: TCP 150-160 overlaps 100-200",
			"spec.domain.devices.interfaces[0].portRanges[2].start: 300 is after end 299",
			`spec.domain.devices.interfaces[0].portRanges[3].protocol: "ICMP": expected TCP or UDP`}},
		{"port ranges with bridge", "      interfaces:\n        - name: default\n          bridge: {}\n          portRanges:\n            - {protocol: TCP, start: 1, end: 2}\n", pod, true,
			[]string{"spec.domain.devices.interfaces[0].portRanges: port ranges are forwarded by the masquerade binding only"}},
		{"VM networks", masq(""), "  networks:\n    - name: default\n      pod:\n        vmNetworkCIDR: 10.0.0.0/31\n", true,
			[]string{`spec.networks[0].pod.vmNetworkCIDR: "10.0.0.0/31": too small`}},
		{"VM network IPv6", masq(""), "  networks:\n    - name: default\n      pod:\n        vmNetworkCIDR: fd10::/120\n        vmIPv6NetworkCIDR: fd10::/120\n", true,
			[]string{`spec.networks[0].pod.vmIPv6NetworkCIDR: not supported by converge (the masquerade binding is IPv4 only)`,
				`spec.networks[0].pod.vmNetworkCIDR: "fd10::/120": expected an IPv4 CIDR`}},
		{"two pod networks", "      interfaces:\n        - name: a\n          masquerade: {}\n        - name: b\n          masquerade: {}\n",
			"  networks:\n    - name: a\n      pod: {}\n    - name: b\n      pod: {}\n", true,
			[]string{"spec.networks[1]: more than one pod network"}},
		{"dhcpOptions", masq(`          dhcpOptions:
            ntpServers: [ntp.example]
            privateOptions:
              - {option: 100, value: x}
`), pod, true, []string{
			`spec.domain.devices.interfaces[0].dhcpOptions.ntpServers[0]: "ntp.example": expected an IPv4 address`,
			"spec.domain.devices.interfaces[0].dhcpOptions.privateOptions[0].option: 100: expected 224 to 254"}},
		{"dhcpOptions on a node bridge", "      interfaces:\n        - name: lan\n          bridge: {}\n          dhcpOptions:\n            bootFileName: pxelinux.0\n",
			"  networks:\n    - name: lan\n      multus:\n        networkName: lan\n", true,
			[]string{"spec.domain.devices.interfaces[0].dhcpOptions: the interface is on the node bridge br-lan, where converge serves no DHCP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := domain.Build(nicVMI(t, tc.devices, tc.networks), nicOptions(tc.podNetwork, false))
			if err == nil {
				t.Fatal("built, want refused")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nwant it to contain\n%s", err, w)
				}
			}
			if n := strings.Count(err.Error(), "; ") + 1; n != len(tc.want) {
				t.Errorf("%d errors, want %d:\n%v", n, len(tc.want), err)
			}
		})
	}
}
