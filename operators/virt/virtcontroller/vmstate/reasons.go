package vmstate

// FailedPvcNotFoundReason is the reason of a VMI's Synchronized=False
// condition while a PVC its volumes name does not exist, as KubeVirt's VMI
// controller writes it (pkg/controller/controller.go FailedPvcNotFoundReason,
// pkg/virt-controller/watch/vmi/datavolumes.go): converge's VMI scheduler
// writes it, and the VM controller reads it as printableStatus
// ErrorPvcNotFound.
const FailedPvcNotFoundReason = "FailedPvcNotFound"
