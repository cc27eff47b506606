package templatevalidator

import (
	"reflect"
	"sync"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Sizes of the reference VM's lists (upstream kubevirtjobs/virtualmachine.go).
const (
	refMaxDisks         = 64
	refMaxIfaces        = 64
	refMaxPortsPerIface = 16
	refMaxNTPServers    = 8
	refMaxItems         = 64
)

// ReferenceVM gives the reference VM a rule reads a path from when the
// VM lacks it: a VirtualMachine whose spec.template.spec.domain has every
// optional field allocated with its zero value (pointers set, maps empty,
// lists of 64 items, 16 ports per interface, 8 NTP servers) and
// KubeVirt's defaults applied (upstream kubevirtjobs NewDefaultVirtualMachine).
// It is built once and shared: do not modify it.
var ReferenceVM = sync.OnceValue(newReferenceVM)

func newReferenceVM() *kubevirtv1.VirtualMachine {
	dom := kubevirtv1.DomainSpec{}
	n := map[string]int{"Disks": refMaxDisks, "Interfaces": refMaxIfaces, "Ports": refMaxPortsPerIface, "NTPServers": refMaxNTPServers}
	allocate(reflect.TypeOf(dom), reflect.ValueOf(&dom).Elem(), n)
	vm := &kubevirtv1.VirtualMachine{}
	vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
	vm.Spec.Template.Spec.Domain = dom
	kubevirtv1.SetObjectDefaults_VirtualMachine(vm)
	for i := range vm.Spec.Template.Spec.Domain.Devices.Disks {
		if c := vm.Spec.Template.Spec.Domain.Devices.Disks[i].CDRom; c != nil {
			ro := true
			c.ReadOnly = &ro
			if c.Tray == "" {
				c.Tray = kubevirtv1.TrayStateClosed
			}
		}
	}
	return vm
}

// allocate sets every exported field of the struct v of type t: maps
// empty, slices of n[field name] (default refMaxItems) items themselves
// allocated when structs, pointers to allocated values, nested structs
// allocated (upstream kubevirtjobs/refgen.go makeStruct).
func allocate(t reflect.Type, v reflect.Value, n map[string]int) {
	for i := 0; i < v.NumField(); i++ {
		ft := t.Field(i)
		if !ft.IsExported() {
			continue
		}
		f := v.Field(i)
		switch ft.Type.Kind() {
		case reflect.Map:
			f.Set(reflect.MakeMap(ft.Type))
		case reflect.Slice:
			num, ok := n[ft.Name]
			if !ok {
				num = refMaxItems
			}
			f.Set(reflect.MakeSlice(ft.Type, num, num))
			if ft.Type.Elem().Kind() == reflect.Struct {
				for j := 0; j < num; j++ {
					allocate(ft.Type.Elem(), f.Index(j), n)
				}
			}
		case reflect.Chan:
			f.Set(reflect.MakeChan(ft.Type, 0))
		case reflect.Pointer:
			pv := reflect.New(ft.Type.Elem())
			if pv.Elem().Kind() == reflect.Struct {
				allocate(ft.Type.Elem(), pv.Elem(), n)
			}
			f.Set(pv)
		case reflect.Struct:
			allocate(ft.Type, f, n)
		}
	}
}
