package vm

import (
	"context"
	"errors"
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/operators/virt/instancetype"
)

// The VM's Failure condition reasons when its instancetype or preference
// cannot be found (kubevirt pkg/instancetype/controller/vm/controller.go
// checkResourcesExist) or stored.
const (
	ReasonFailedFindInstancetype = "FailedFindInstancetype"
	ReasonFailedFindPreference   = "FailedFindPreference"
	ReasonFailedCreate           = "FailedCreate"
)

// reasonError is an error with the reason of the VM's Failure condition.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// failureReason gives the Failure condition's reason for err: its own, or
// FailedCreate.
func failureReason(err error) string {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	return ReasonFailedCreate
}

// instancetypes gives the finder and store of the instancetypes and
// preferences: uncached reads (APIReader, else Client), as KubeVirt's
// admitter reads them.
func (r *Reconciler) instancetypes() (instancetype.Finder, instancetype.Store) {
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	f := instancetype.Finder{Reader: reader}
	return f, instancetype.Store{Finder: f, Client: r.Client}
}

// syncInstancetype is KubeVirt's instancetype controller Sync (kubevirt
// pkg/instancetype/controller/vm/controller.go, with its default
// referencePolicy reference) for a VM naming an instancetype or a
// preference: both must exist (else FailedFindInstancetype or
// FailedFindPreference), then their ControllerRevisions are stored and
// recorded in vm's status (instancetype.Store; else FailedCreate with
// KubeVirt's message). Until it succeeds the VM gets no VMI.
func (r *Reconciler) syncInstancetype(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	if vm.Spec.Instancetype == nil && vm.Spec.Preference == nil {
		return nil
	}
	f, s := r.instancetypes()
	if _, err := f.Instancetype(ctx, vm); err != nil {
		return &reasonError{ReasonFailedFindInstancetype, err}
	}
	if _, err := f.Preference(ctx, vm); err != nil {
		return &reasonError{ReasonFailedFindPreference, err}
	}
	if err := s.Store(ctx, vm); err != nil {
		return &reasonError{ReasonFailedCreate, fmt.Errorf("error encountered while storing instancetype.kubevirt.io controllerRevisions: %w", err)}
	}
	return nil
}

// expandInstancetype expands the instancetype and preference vm uses (from
// the revisions syncInstancetype recorded) into vmi, the VMI NewVMI gave
// for vm (instancetype.Finder.ApplyToNewVMI), with KubeVirt's Failure
// message when it fails ("Failure while starting VMI: VMI conflicts with
// instancetype spec in fields: [...]", kubevirt
// pkg/virt-controller/watch/vm/vm.go startVMI, syncRunStrategy).
func (r *Reconciler) expandInstancetype(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	f, _ := r.instancetypes()
	if err := f.ApplyToNewVMI(ctx, vm, vmi); err != nil {
		return fmt.Errorf("Failure while starting VMI: %w", err) //nolint:staticcheck // KubeVirt's message
	}
	return nil
}
