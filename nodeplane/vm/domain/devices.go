package domain

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"
)

// diskBuses are the buses converge supports per device kind, the first
// being the default, and the target device prefix of each bus.
var (
	diskBuses  = []kubevirtv1.DiskBus{kubevirtv1.DiskBusVirtio, kubevirtv1.DiskBusSATA}
	cdromBuses = []kubevirtv1.DiskBus{kubevirtv1.DiskBusSATA}
	busPrefix  = map[kubevirtv1.DiskBus]string{kubevirtv1.DiskBusVirtio: "vd", kubevirtv1.DiskBusSATA: "sd"}
	nicModels  = []string{"virtio", "e1000", "e1000e", "rtl8139"}
)

func (b *builder) disks(devs *libvirtxml.DomainDeviceList) {
	spec := &b.vmi.Spec
	volumes := map[string]int{}
	for j, v := range spec.Volumes {
		volumes[v.Name] = j
	}
	used := map[string]bool{}
	next := map[string]int{} // target prefix -> next index
	for i, disk := range spec.Domain.Devices.Disks {
		p := fmt.Sprintf("spec.domain.devices.disks[%d]", i)
		j, ok := volumes[disk.Name]
		if !ok {
			b.errs.Add(p+".name", "no volume named %q in spec.volumes", disk.Name)
			continue
		}
		if used[disk.Name] {
			b.errs.Add(p+".name", "volume %q is already used by another disk", disk.Name)
			continue
		}
		used[disk.Name] = true
		out := libvirtxml.DomainDisk{Device: "disk", Alias: &libvirtxml.DomainAlias{Name: "ua-" + disk.Name}}
		var bus kubevirtv1.DiskBus
		readOnly := false
		switch {
		case disk.CDRom != nil:
			out.Device = "cdrom"
			bus = b.bus(p+".cdrom.bus", disk.CDRom.Bus, cdromBuses)
			if disk.CDRom.ReadOnly != nil && !*disk.CDRom.ReadOnly {
				b.errs.Add(p+".cdrom.readonly", "a cdrom is read-only")
			}
			readOnly = true
		case disk.LUN != nil:
			continue // rejected by the support table
		default:
			var t kubevirtv1.DiskTarget
			if disk.Disk != nil {
				t = *disk.Disk
			}
			bus = b.bus(p+".disk.bus", t.Bus, diskBuses)
			readOnly = t.ReadOnly
		}
		prefix := busPrefix[bus]
		out.Target = &libvirtxml.DomainDiskTarget{Dev: prefix + driveLetters(next[prefix]), Bus: string(bus)}
		next[prefix]++
		src, ro, ok := b.volumeSource(j)
		if !ok {
			continue
		}
		if src.Block {
			out.Source = &libvirtxml.DomainDiskSource{Block: &libvirtxml.DomainDiskSourceBlock{Dev: src.Path}}
		} else {
			out.Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: src.Path}}
		}
		out.Driver = &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"}
		switch disk.Cache {
		case "", kubevirtv1.CacheNone, kubevirtv1.CacheWriteThrough, kubevirtv1.CacheWriteBack:
			out.Driver.Cache = string(disk.Cache)
		default:
			b.errs.Add(p+".cache", "%q: expected none, writethrough or writeback", disk.Cache)
		}
		switch disk.IO {
		case "", kubevirtv1.IONative, kubevirtv1.IOThreads:
			out.Driver.IO = string(disk.IO)
		default:
			b.errs.Add(p+".io", "%q: expected native or threads", disk.IO)
		}
		if readOnly || ro {
			out.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
		}
		out.Serial = disk.Serial
		out.Boot = b.bootOrder(p+".bootOrder", disk.BootOrder)
		devs.Disks = append(devs.Disks, out)
	}
	for j, v := range spec.Volumes {
		if !used[v.Name] {
			b.errs.Add(fmt.Sprintf("spec.volumes[%d].name", j), "volume %q is not used by any disk", v.Name)
		}
	}
}

// volumeSource resolves volume j; ok is false when it has no supported
// source (the error is recorded, by the support table or here).
func (b *builder) volumeSource(j int) (src DiskSource, readOnly, ok bool) {
	v := b.vmi.Spec.Volumes[j]
	p := fmt.Sprintf("spec.volumes[%d]", j)
	switch {
	case v.HostDisk != nil:
		if v.HostDisk.Type != kubevirtv1.HostDiskExists {
			b.errs.Add(p+".hostDisk.type", "%q: only Disk (an existing image) is supported", v.HostDisk.Type)
			return src, false, false
		}
		if !filepath.IsAbs(v.HostDisk.Path) {
			b.errs.Add(p+".hostDisk.path", "%q: must be absolute", v.HostDisk.Path)
			return src, false, false
		}
		return DiskSource{Path: filepath.Clean(v.HostDisk.Path)}, false, true
	case v.PersistentVolumeClaim != nil:
		claim := v.PersistentVolumeClaim.ClaimName
		if b.opts.ResolvePVC == nil {
			b.errs.Add(p+".persistentVolumeClaim", "claim %q: this node has no PVC resolver", claim)
			return src, false, false
		}
		src, err := b.opts.ResolvePVC(b.vmi.Namespace, claim)
		if err != nil {
			b.errs.Add(p+".persistentVolumeClaim", "claim %q: %v", claim, err)
			return src, false, false
		}
		if !filepath.IsAbs(src.Path) {
			b.errs.Add(p+".persistentVolumeClaim", "claim %q: resolver gave %q, expected an absolute path", claim, src.Path)
			return src, false, false
		}
		return src, v.PersistentVolumeClaim.ReadOnly, true
	}
	if hasSource(v) {
		return src, false, false // a rejected source, already reported
	}
	b.errs.Add(p, "volume %q has no source: expected hostDisk or persistentVolumeClaim", v.Name)
	return src, false, false
}

// hasSource reports whether a volume sets any source at all,
// supported or not.
func hasSource(v kubevirtv1.Volume) bool {
	return v.VolumeSource != (kubevirtv1.VolumeSource{})
}

func (b *builder) bus(path string, bus kubevirtv1.DiskBus, allowed []kubevirtv1.DiskBus) kubevirtv1.DiskBus {
	if bus == "" {
		return allowed[0]
	}
	for _, a := range allowed {
		if bus == a {
			return bus
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	b.errs.Add(path, "%q: expected %s", bus, strings.Join(names, " or "))
	return allowed[0]
}

func (b *builder) bootOrder(path string, order *uint) *libvirtxml.DomainDeviceBoot {
	if order == nil {
		return nil
	}
	if *order == 0 {
		b.errs.Add(path, "must be 1 or more")
		return nil
	}
	return &libvirtxml.DomainDeviceBoot{Order: *order}
}

// driveLetters gives a, b, …, z, aa, ab, … for 0, 1, … as Linux names
// disks.
func driveLetters(i int) string {
	s := ""
	for i >= 0 {
		s = string(rune('a'+i%26)) + s
		i = i/26 - 1
	}
	return s
}

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

func (b *builder) console(devs *libvirtxml.DomainDeviceList) {
	d := &b.vmi.Spec.Domain.Devices
	if d.AutoattachSerialConsole != nil && !*d.AutoattachSerialConsole {
		return
	}
	port := uint(0)
	serial := libvirtxml.DomainSerial{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainSerialTarget{Port: &port},
	}
	wantLog := d.LogSerialConsole == nil || *d.LogSerialConsole
	switch {
	case wantLog && b.opts.SerialLogDir != "":
		serial.Log = &libvirtxml.DomainChardevLog{File: filepath.Join(b.opts.SerialLogDir, SerialLogName(b.vmi.Namespace, b.vmi.Name)), Append: "on"}
	case d.LogSerialConsole != nil && *d.LogSerialConsole:
		b.errs.Add("spec.domain.devices.logSerialConsole", "this node keeps no serial console log (the agent has no log directory)")
	}
	devs.Serials = []libvirtxml.DomainSerial{serial}
	devs.Consoles = []libvirtxml.DomainConsole{{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &port},
	}}
}

// SerialLogName is the file name of a VMI's serial console log inside
// Options.SerialLogDir: "<namespace>_<name>-serial.log".
func SerialLogName(namespace, name string) string {
	return Name(namespace, name) + "-serial.log"
}

func (b *builder) memBalloon(devs *libvirtxml.DomainDeviceList) {
	if a := b.vmi.Spec.Domain.Devices.AutoattachMemBalloon; a != nil && !*a {
		devs.MemBalloon = &libvirtxml.DomainMemBalloon{Model: "none"}
		return
	}
	devs.MemBalloon = &libvirtxml.DomainMemBalloon{Model: "virtio"}
}
