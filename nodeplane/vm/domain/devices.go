package domain

import (
	"path/filepath"

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
