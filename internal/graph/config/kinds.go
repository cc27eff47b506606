package config

import (
	"fmt"
	"strings"
)

// Kind is a document type a config may hold besides the HyperConverged and
// the HostPathProvisioner: a workload, applied by the graph's workloads
// component.
type Kind struct {
	// APIVersion is "group/version", or "v1" for the core group.
	APIVersion string
	// Kind is the object kind, as upstream spells it.
	Kind string
	// Namespaced says whether objects of the kind live in a namespace.
	Namespaced bool
}

// Group is the API group of k ("" for core).
func (k Kind) Group() string {
	if i := strings.IndexByte(k.APIVersion, '/'); i >= 0 {
		return k.APIVersion[:i]
	}
	return ""
}

// String gives "apiVersion/kind", the key Load matches documents by.
func (k Kind) String() string { return k.APIVersion + "/" + k.Kind }

// WorkloadKinds are the workload kinds a config may hold, in the order
// their names are listed to users: the VMs (KubeVirt's kubevirt.io/v1), the
// disks they import (CDI's DataVolume), the networks they attach to
// (Multus' NetworkAttachmentDefinition), the instancetypes and preferences
// they name (instancetype.kubevirt.io/v1beta1), and the plain objects they
// need: Namespaces, the Secrets cloud-init and imports read, ConfigMaps.
var WorkloadKinds = []Kind{
	{"kubevirt.io/v1", "VirtualMachine", true},
	{"kubevirt.io/v1", "VirtualMachineInstance", true},
	{"cdi.kubevirt.io/v1beta1", "DataVolume", true},
	{"k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", true},
	{"instancetype.kubevirt.io/v1beta1", "VirtualMachineInstancetype", true},
	{"instancetype.kubevirt.io/v1beta1", "VirtualMachineClusterInstancetype", false},
	{"instancetype.kubevirt.io/v1beta1", "VirtualMachinePreference", true},
	{"instancetype.kubevirt.io/v1beta1", "VirtualMachineClusterPreference", false},
	{"v1", "Namespace", false},
	{"v1", "Secret", true},
	{"v1", "ConfigMap", true},
}

// WorkloadKind gives the workload kind of apiVersion and kind, and whether
// there is one.
func WorkloadKind(apiVersion, kind string) (Kind, bool) {
	for _, k := range WorkloadKinds {
		if k.APIVersion == apiVersion && k.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

// acceptedKinds names every kind a config may hold, grouped by
// apiVersion, for the error on any other document.
func acceptedKinds() string {
	parts := []string{
		"a HyperConverged (hco.kubevirt.io/v1beta1 or v1)",
		"optionally a HostPathProvisioner (hostpathprovisioner.kubevirt.io/v1beta1)",
	}
	var order []string
	byVersion := map[string][]string{}
	for _, k := range WorkloadKinds {
		if _, ok := byVersion[k.APIVersion]; !ok {
			order = append(order, k.APIVersion)
		}
		byVersion[k.APIVersion] = append(byVersion[k.APIVersion], k.Kind)
	}
	var workloads []string
	for _, av := range order {
		workloads = append(workloads, fmt.Sprintf("%s %s", av, strings.Join(byVersion[av], ", ")))
	}
	parts = append(parts, "and workloads: "+strings.Join(workloads, "; "))
	return strings.Join(parts, ", ")
}
