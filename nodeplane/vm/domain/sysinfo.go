package domain

import "libvirt.org/go/libvirtxml"

// sysInfo gives the SMBIOS system entries of the domain whose UUID is
// uuid, in virt-launcher's order (converter.go
// Convert_v1_Firmware_To_related_apis, then "c.SMBios"): the UUID when
// the VMI has spec.domain.firmware, and its serial when set, then the
// node's SMBIOS configuration (Options.SMBIOS). None without either.
func (b *builder) sysInfo(uuid string) []libvirtxml.DomainSysInfoEntry {
	var e []libvirtxml.DomainSysInfoEntry
	if fw := b.vmi.Spec.Domain.Firmware; fw != nil {
		e = append(e, libvirtxml.DomainSysInfoEntry{Name: "uuid", Value: uuid})
		if fw.Serial != "" {
			e = append(e, libvirtxml.DomainSysInfoEntry{Name: "serial", Value: fw.Serial})
		}
	}
	if s := b.opts.SMBIOS; s != nil {
		e = append(e,
			libvirtxml.DomainSysInfoEntry{Name: "manufacturer", Value: s.Manufacturer},
			libvirtxml.DomainSysInfoEntry{Name: "family", Value: s.Family},
			libvirtxml.DomainSysInfoEntry{Name: "product", Value: s.Product},
			libvirtxml.DomainSysInfoEntry{Name: "sku", Value: s.SKU},
			libvirtxml.DomainSysInfoEntry{Name: "version", Value: s.Version},
		)
	}
	return e
}
