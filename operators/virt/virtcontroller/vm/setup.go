package vm

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// ControllerName is the VirtualMachine controller's name in the manager,
// its logs and metrics.
const ControllerName = "virtualmachine"

// Options are the VirtualMachine controller's settings.
type Options struct {
	// Concurrency is how many VMs are reconciled in parallel (at least
	// one).
	Concurrency int
	// SkipNameValidation lets several managers in one process register
	// the controller (controller-runtime requires unique controller names
	// per process); for tests.
	SkipNameValidation bool
}

// DefaultOptions gives Concurrency 4.
func DefaultOptions() Options {
	return Options{Concurrency: 4}
}

// SetupWithManager takes a manager whose scheme knows kubevirt.io/v1,
// cdi.kubevirt.io/v1beta1 and the client-go types, and registers the
// ControllerName controller with it (also after the manager started: it
// starts at once): a Reconciler on the manager's client for each
// VirtualMachine, for the VMIs it owns (through their controller owner
// reference), and for the DataVolumes and PVCs its dataVolumeTemplates or
// template volumes name (referencingVMs), opts.Concurrency VMs at a time.
// The error names the controller that could not be built.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Watches(&cdiv1.DataVolume{}, referencingVMs(mgr.GetClient())).
		Watches(&corev1.PersistentVolumeClaim{}, referencingVMs(mgr.GetClient())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.Concurrency, 1), SkipNameValidation: &opts.SkipNameValidation}).
		Complete(r); err != nil {
		return fmt.Errorf("building the %s controller: %w", ControllerName, err)
	}
	return nil
}
