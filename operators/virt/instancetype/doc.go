// Package instancetype is KubeVirt's instancetypes and preferences as
// converge's VM controller and VM validation webhook use them: the pure
// logic of expanding a VirtualMachine's spec.instancetype and
// spec.preference (instancetype.kubevirt.io/v1beta1) into the VMI spec
// (ApplyToVMI: the instancetype's fields, refused as Conflicts where the
// VM sets them too, then the preference's defaults for the fields the VM
// leaves unset), the checks virt-api runs on the result (CheckSpreadCPUTopology,
// CheckRequirements, ValidateMatchers), and the cluster side: finding the
// instancetype or preference a VM names, or the ControllerRevision that
// froze it (Finder), and storing that revision, owned by the VM, with its
// name in status.instancetypeRef / status.preferenceRef (Store), so that a
// later edit of the instancetype changes a VM only once it names another
// revision.
//
// Everything follows KubeVirt v1.9.0 pkg/instancetype (apply/,
// preference/apply/, conflict/, find/, preference/find/, revision/,
// preference/requirements/, preference/validation/, webhooks/vm/,
// controller/vm/); each function cites the file it follows. The
// instancetype.kubevirt.io objects are read as unstructured objects and
// converted to the kubevirt.io/api types, so no scheme needs them.
// inferFromVolume, which KubeVirt resolves from a volume's labels, is not
// implemented: ValidateMatchers refuses it with the path and the reason.
package instancetype
