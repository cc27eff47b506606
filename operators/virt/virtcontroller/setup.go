package virtcontroller

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/crdwait"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/nodehealth"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vm"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmrestore"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmsnapshot"
)

// logName is the role's log name and error prefix, kept from before the
// package was named virtcontroller.
const logName = "virtctl"

// CRDNames are the CRDs the controllers watch; Setup waits for them. The
// DataVolume CRD is installed with the VM CRDs (the graph's "crds" stage)
// whether or not CDI runs: the VM controller creates the DataVolumes of
// dataVolumeTemplates and the scheduler waits for those of the volumes.
var CRDNames = []string{"virtualmachines.kubevirt.io", "virtualmachineinstances.kubevirt.io", dvapi.CRDName}

// SnapshotCRDNames are the CRDs the snapshot and restore controllers
// watch besides CRDNames: KubeVirt's snapshot.kubevirt.io (the graph's
// "crds" stage) and the VolumeSnapshot CRDs of snapshot.storage.k8s.io
// (installed with the snapshot controller's role); Setup starts those two
// controllers once all are established, independently of the others.
var SnapshotCRDNames = []string{"virtualmachinesnapshots.snapshot.kubevirt.io", "virtualmachinesnapshotcontents.snapshot.kubevirt.io",
	"virtualmachinerestores.snapshot.kubevirt.io", "volumesnapshots.snapshot.storage.k8s.io", "volumesnapshotclasses.snapshot.storage.k8s.io"}

// Setup registers the "virtualmachine" (package vm), "vmi-scheduler"
// (package scheduler) and "vmi-node-health" (package nodehealth)
// controllers with mgr once the VirtualMachine and VirtualMachineInstance
// CRDs are established (converge installs them in the graph's "crds"
// stage, so they may appear after converge-controller starts; until then
// it polls every opts.CRDPoll) and opts.Gate, if any, opened (the virt
// operator's: a native KubeVirt CR exists); and the "vmsnapshot" and
// "vmrestore" controllers (packages vmsnapshot, vmrestore) once the
// SnapshotCRDNames are established too and the gate opened. mgr's scheme
// must know kubevirt.io/v1, cdi.kubevirt.io/v1beta1,
// snapshot.kubevirt.io/v1beta1, snapshot.storage.k8s.io/v1 and the
// client-go types.
func Setup(mgr ctrl.Manager, opts Options) error {
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !crdwait.Wait(ctx, mgr.GetAPIReader(), opts.CRDPoll, append(append([]string{}, CRDNames...), SnapshotCRDNames...)...) {
			return nil
		}
		if opts.Gate != nil {
			if err := opts.Gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("%s: %w", logName, err)
			}
		}
		ctrl.Log.WithName(logName).Info("starting the VM snapshot and restore controllers")
		if err := vmsnapshot.SetupWithManager(mgr, vmsnapshot.Options{SkipNameValidation: opts.SkipNameValidation}); err != nil {
			return fmt.Errorf("%s: %w", logName, err)
		}
		if err := vmrestore.SetupWithManager(mgr, vmrestore.Options{SkipNameValidation: opts.SkipNameValidation}); err != nil {
			return fmt.Errorf("%s: %w", logName, err)
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		log := ctrl.Log.WithName(logName)
		if !crdwait.Wait(ctx, mgr.GetAPIReader(), opts.CRDPoll, CRDNames...) {
			return nil
		}
		if opts.Gate != nil {
			log.Info("VirtualMachine CRDs established; waiting for a native KubeVirt")
			if err := opts.Gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("%s: %w", logName, err)
			}
		}
		log.Info("starting the VM controller and scheduler")
		if err := register(mgr, opts); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}))
}

// register builds the three controllers (also after mgr started: they
// start at once), each with its share of opts.
func register(mgr ctrl.Manager, opts Options) error {
	if err := vm.SetupWithManager(mgr, vm.Options{
		Concurrency: opts.Concurrency, SkipNameValidation: opts.SkipNameValidation}); err != nil {
		return fmt.Errorf("%s: %w", logName, err)
	}
	if err := scheduler.SetupWithManager(mgr, scheduler.Options{
		UnschedulableRetry: opts.UnschedulableRetry, SkipNameValidation: opts.SkipNameValidation, Ratios: opts.Ratios}); err != nil {
		return fmt.Errorf("%s: %w", logName, err)
	}
	if err := nodehealth.SetupWithManager(mgr, nodehealth.Options{
		HeartbeatTimeout: opts.HeartbeatTimeout, SkipNameValidation: opts.SkipNameValidation}); err != nil {
		return fmt.Errorf("%s: %w", logName, err)
	}
	return nil
}
