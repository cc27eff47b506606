package macpool

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// VirtualMachineGVK is KubeVirt's VirtualMachine, whose NICs get MACs.
var VirtualMachineGVK = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"}

// interfacesPath is where a VirtualMachine lists its NICs.
var interfacesPath = []string{"spec", "template", "spec", "domain", "devices", "interfaces"}

// nic is one entry of a VirtualMachine's interfaces.
type nic struct {
	name string
	mac  string // as written, "" for none
}

// nics gives the interfaces of a VirtualMachine object (nil when it has
// none); a malformed list is an error naming the field.
func nics(obj map[string]any) ([]nic, error) {
	list, found, err := unstructured.NestedSlice(obj, interfacesPath...)
	if err != nil {
		return nil, fmt.Errorf("spec.template.spec.domain.devices.interfaces: %w", err)
	}
	if !found {
		return nil, nil
	}
	out := make([]nic, 0, len(list))
	for i, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.template.spec.domain.devices.interfaces[%d]: want an object, got %T", i, x)
		}
		name, _ := m["name"].(string)
		mac, _ := m["macAddress"].(string)
		out = append(out, nic{name: name, mac: mac})
	}
	return out, nil
}

// setMACs writes macs (by interface index; "" leaves one alone) into
// obj's interfaces.
func setMACs(obj map[string]any, macs []string) error {
	list, _, err := unstructured.NestedSlice(obj, interfacesPath...)
	if err != nil {
		return err
	}
	for i, mac := range macs {
		if mac != "" {
			list[i].(map[string]any)["macAddress"] = mac
		}
	}
	return unstructured.SetNestedSlice(obj, list, interfacesPath...)
}

// storedMACs gives the parsable MACs of a stored VirtualMachine (an
// unparsable one cannot collide with an address the pool hands out).
func storedMACs(u *unstructured.Unstructured) []MAC {
	ns, err := nics(u.Object)
	if err != nil {
		return nil
	}
	var out []MAC
	for _, n := range ns {
		if m, err := ParseMAC(n.mac); err == nil {
			out = append(out, m)
		}
	}
	return out
}
