package vm

import (
	"context"
	"slices"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// referencingVMs maps a DataVolume or PVC to the VMs of its namespace
// that name it, in a dataVolumeTemplate or as the claim of a
// persistentVolumeClaim or dataVolume volume (References), read from c
// (the cache): their DataVolume step and printableStatus follow it, as
// KubeVirt's VM controller queues the VMs of a DataVolume
// (queueVMsForDataVolume) and of a PVC.
func referencingVMs(c client.Client) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &kubevirtv1.VirtualMachineList{}
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if References(&list.Items[i], o.GetName()) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	})
}

// References reports whether vm names the DataVolume or PVC name of its
// namespace: a dataVolumeTemplate of that name, or a template volume
// whose claim it is (a persistentVolumeClaim's claimName, a dataVolume's
// name).
func References(vm *kubevirtv1.VirtualMachine, name string) bool {
	if slices.ContainsFunc(vm.Spec.DataVolumeTemplates, func(t kubevirtv1.DataVolumeTemplateSpec) bool { return t.Name == name }) {
		return true
	}
	if vm.Spec.Template == nil {
		return false
	}
	for i := range vm.Spec.Template.Spec.Volumes {
		if claimName(&vm.Spec.Template.Spec.Volumes[i]) == name {
			return true
		}
	}
	return false
}
