package domain

import (
	"fmt"
	"path/filepath"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"
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
