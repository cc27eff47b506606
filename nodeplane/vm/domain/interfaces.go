package domain

import (
	"fmt"
	"net"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"
)

func (b *builder) interfaces(devs *libvirtxml.DomainDeviceList) {
	spec := &b.vmi.Spec
	ifaces := spec.Domain.Devices.Interfaces
	if a := spec.Domain.Devices.AutoattachPodInterface; a != nil && *a && len(ifaces) == 0 {
		b.errs.Add("spec.domain.devices.autoattachPodInterface", "only false is supported: converge never adds a NIC the spec does not list, so declare the interface and its network")
	}
	networks := map[string]int{}
	for j, n := range spec.Networks {
		networks[n.Name] = j
	}
	used := map[string]bool{}
	for i, iface := range ifaces {
		p := fmt.Sprintf("spec.domain.devices.interfaces[%d]", i)
		j, ok := networks[iface.Name]
		if !ok {
			b.errs.Add(p+".name", "no network named %q in spec.networks", iface.Name)
			continue
		}
		used[iface.Name] = true
		if iface.Bridge == nil {
			if iface.InterfaceBindingMethod == (kubevirtv1.InterfaceBindingMethod{}) && iface.Binding == nil {
				b.errs.Add(p, "no binding: set bridge: {}")
			}
			continue // other bindings are rejected by the support table
		}
		network := spec.Networks[j]
		np := fmt.Sprintf("spec.networks[%d]", j)
		if network.Pod == nil && network.Multus == nil {
			b.errs.Add(np, "network %q has no source: expected pod or multus", network.Name)
			continue
		}
		var src libvirtxml.DomainInterfaceSource
		var target *libvirtxml.DomainInterfaceTarget
		var mtu *libvirtxml.DomainInterfaceMTU
		tap, isTap := Tap{}, false
		if b.opts.ResolveTap != nil {
			var err error
			if tap, isTap, err = b.opts.ResolveTap(b.vmi.Namespace, network); err != nil {
				b.errs.Add(np, "network %q: %v", network.Name, err)
				continue
			}
		}
		switch {
		case isTap:
			if tap.Name == "" || len(tap.Name) > 15 || strings.ContainsAny(tap.Name, "/ \t\n") {
				b.errs.Add(np, "network %q: tap name %q: expected 1 to 15 bytes without '/' or spaces", network.Name, tap.Name)
				continue
			}
			src.Ethernet = &libvirtxml.DomainInterfaceSourceEthernet{}
			target = &libvirtxml.DomainInterfaceTarget{Dev: tap.Name, Managed: "yes"}
			if tap.MTU > 0 {
				mtu = &libvirtxml.DomainInterfaceMTU{Size: uint(tap.MTU)}
			}
		case b.opts.ResolveBridge == nil:
			b.errs.Add(np, "network %q: this node has no bridge resolver", network.Name)
			continue
		default:
			bridge, err := b.opts.ResolveBridge(b.vmi.Namespace, network)
			if err != nil {
				b.errs.Add(np, "network %q: %v", network.Name, err)
				continue
			}
			src.Bridge = &libvirtxml.DomainInterfaceSourceBridge{Bridge: bridge}
		}
		model := iface.Model
		if model == "" {
			model = "virtio"
		} else if !contains(nicModels, model) {
			b.errs.Add(p+".model", "%q: expected one of %s", model, strings.Join(nicModels, ", "))
		}
		mac := MAC(string(b.vmi.UID), iface.Name)
		if iface.MacAddress != "" {
			hw, err := net.ParseMAC(iface.MacAddress)
			if err != nil || len(hw) != 6 {
				b.errs.Add(p+".macAddress", "%q: expected a 6-byte MAC such as 52:54:00:12:34:56", iface.MacAddress)
			} else {
				mac = hw.String()
			}
		}
		devs.Interfaces = append(devs.Interfaces, libvirtxml.DomainInterface{
			MAC:    &libvirtxml.DomainInterfaceMAC{Address: mac},
			Source: &src,
			Target: target,
			MTU:    mtu,
			Model:  &libvirtxml.DomainInterfaceModel{Type: model},
			Boot:   b.bootOrder(p+".bootOrder", iface.BootOrder),
			Alias:  &libvirtxml.DomainAlias{Name: "ua-" + iface.Name},
		})
	}
	for j, n := range spec.Networks {
		if !used[n.Name] {
			b.errs.Add(fmt.Sprintf("spec.networks[%d].name", j), "network %q is not used by any interface", n.Name)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
