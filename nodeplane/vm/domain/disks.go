package domain

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/converge-dev/converge/api/vmisupport"
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
		format := src.Format
		if format == "" {
			format = FormatRaw
		}
		out.Driver = &libvirtxml.DomainDiskDriver{Name: "qemu", Type: format}
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
		return DiskSource{Path: filepath.Clean(v.HostDisk.Path), Format: FormatRaw}, false, true
	case v.PersistentVolumeClaim != nil:
		src, ok := b.claim(p+".persistentVolumeClaim", "claim", v.PersistentVolumeClaim.ClaimName)
		return src, v.PersistentVolumeClaim.ReadOnly, ok
	case v.DataVolume != nil:
		// CDI names a DataVolume's PVC after it (kubevirt.io/api core/v1
		// DataVolumeSource: "Name of both the DataVolume and the PVC").
		src, ok := b.claim(p+".dataVolume", "DataVolume", v.DataVolume.Name)
		return src, false, ok
	}
	if kind := NodeVolumeSource(v); kind != "" {
		src, ok := b.nodeVolume(p+"."+kind, v)
		return src, false, ok
	}
	if hasSource(v) {
		return src, false, false // a rejected source, already reported
	}
	b.errs.Add(p, "volume %q has no source: expected hostDisk, persistentVolumeClaim, dataVolume, containerDisk, emptyDisk, cloudInitNoCloud, cloudInitConfigDrive, secret or configMap", v.Name)
	return src, false, false
}

// NodeVolumeSource names the source of a volume the node prepares itself
// (Options.ResolveVolume): "containerDisk", "emptyDisk",
// "cloudInitNoCloud", "cloudInitConfigDrive", "secret" or "configMap", as
// spelt in the VMI; "" for any other volume.
func NodeVolumeSource(v kubevirtv1.Volume) string {
	switch {
	case v.ContainerDisk != nil:
		return "containerDisk"
	case v.EmptyDisk != nil:
		return "emptyDisk"
	case v.CloudInitNoCloud != nil:
		return "cloudInitNoCloud"
	case v.CloudInitConfigDrive != nil:
		return "cloudInitConfigDrive"
	case v.Secret != nil:
		return "secret"
	case v.ConfigMap != nil:
		return "configMap"
	}
	return ""
}

// claim resolves a PVC (or a DataVolume's PVC) through Options.ResolvePVC;
// what names the object in messages ("claim", "DataVolume").
func (b *builder) claim(path, what, name string) (DiskSource, bool) {
	if b.opts.ResolvePVC == nil {
		b.errs.Add(path, "%s %q: this node has no PVC resolver", what, name)
		return DiskSource{}, false
	}
	src, err := b.opts.ResolvePVC(b.vmi.Namespace, name)
	if err != nil {
		b.resolverError(path, err, func(reason string) string { return fmt.Sprintf("%s %q: %s", what, name, reason) })
		return DiskSource{}, false
	}
	if !b.checkSource(path, fmt.Sprintf("%s %q: resolver", what, name), src) {
		return DiskSource{}, false
	}
	return src, true
}

// nodeVolume resolves a volume the node prepares through
// Options.ResolveVolume; path is spec.volumes[i].<source>.
func (b *builder) nodeVolume(path string, v kubevirtv1.Volume) (DiskSource, bool) {
	if b.opts.ResolveVolume == nil {
		b.errs.Add(path, "this node prepares no volumes (the agent has no volume resolver)")
		return DiskSource{}, false
	}
	src, err := b.opts.ResolveVolume(b.vmi, v)
	if err != nil {
		b.resolverError(path, err, func(reason string) string { return reason })
		return DiskSource{}, false
	}
	if !b.checkSource(path, "volume resolver", src) {
		return DiskSource{}, false
	}
	return src, true
}

// resolverError records a resolver's error at path: the fields of a
// vmisupport.FieldErrors (or FieldError) below path, anything else at
// path with its message through describe. An error wrapping
// ErrVolumeNotReady counts as not ready.
func (b *builder) resolverError(path string, err error, describe func(string) string) {
	var fes vmisupport.FieldErrors
	var fe *vmisupport.FieldError
	switch {
	case errors.As(err, &fes):
	case errors.As(err, &fe):
		fes = vmisupport.FieldErrors{fe}
	default:
		fes = vmisupport.FieldErrors{{Reason: err.Error()}}
	}
	for _, e := range fes {
		p := path
		if e.Path != "" {
			p += "." + e.Path
		}
		b.errs.Add(p, "%s", describe(e.Reason))
	}
	if errors.Is(err, ErrVolumeNotReady) {
		b.notReady += len(fes)
	}
}

// checkSource refuses a resolver's answer that is not an absolute path or
// names a format other than raw and qcow2.
func (b *builder) checkSource(path, who string, src DiskSource) bool {
	if !filepath.IsAbs(src.Path) {
		b.errs.Add(path, "%s gave %q, expected an absolute path", who, src.Path)
		return false
	}
	switch src.Format {
	case "", FormatRaw, FormatQCOW2:
	default:
		b.errs.Add(path, "%s gave format %q, expected raw or qcow2", who, src.Format)
		return false
	}
	return true
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
