package virtapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmstate"
)

// lifecycle serves PUT virtualmachines/{start,stop,restart} as KubeVirt's
// StartVMRequestHandler, StopVMRequestHandler and RestartVMRequestHandler
// (pkg/virt-api/rest/lifecycle.go): it reads the VM (404 when missing) and
// its VMI, decodes the body (StartOptions, StopOptions, RestartOptions;
// none is the empty options; 400 when it does not decode), takes the
// change vmstate gives, applies its patches with the options' dryRun, and
// answers 202 Accepted. A patch whose test fails (the VM changed since it
// was read) is 409, as KubeVirt's.
func (s *server) lifecycle(w http.ResponseWriter, r *http.Request, verb, ns, name string) {
	ctx := r.Context()
	vm := &kubevirtv1.VirtualMachine{}
	if err := s.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		if apierrors.IsNotFound(err) {
			writeError(w, r, apierrors.NewNotFound(vmstate.Resource, name))
		} else {
			writeError(w, r, apierrors.NewInternalError(fmt.Errorf("unable to retrieve vm [%s]: %v", name, err)))
		}
		return
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); apierrors.IsNotFound(err) {
		vmi = nil
	} else if err != nil {
		writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	var (
		change vmstate.Change
		dryRun []string
		err    error
	)
	switch verb {
	case "start":
		opts := &kubevirtv1.StartOptions{}
		if err = decodeBody(r, opts); err == nil {
			dryRun = opts.DryRun
			change, err = vmstate.Start(vm, vmi, opts)
		}
	case "stop":
		opts := &kubevirtv1.StopOptions{}
		if err = decodeBody(r, opts); err == nil {
			dryRun = opts.DryRun
			change, err = vmstate.Stop(vm, vmi, opts)
		}
	default:
		opts := &kubevirtv1.RestartOptions{}
		if err = decodeBody(r, opts); err == nil {
			dryRun = opts.DryRun
			change, err = vmstate.Restart(vm, vmi, opts)
		}
	}
	if err == nil {
		err = s.apply(ctx, vm, vmi, change, dryRun)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// apply applies change's patches in order (VMI, VM spec, VM status). A
// failed test operation is KubeVirt's 409 on the VM, any other error 500.
func (s *server) apply(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, change vmstate.Change, dryRun []string) error {
	po := &client.PatchOptions{DryRun: dryRun}
	if change.VMI != nil {
		// KubeVirt answers any failure of this patch with 500.
		if err := s.o.Client.Patch(ctx, vmi, client.RawPatch(types.JSONPatchType, change.VMI), po); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	var err error
	switch {
	case change.Spec != nil:
		err = s.o.Client.Patch(ctx, vm, client.RawPatch(types.JSONPatchType, change.Spec), po)
	case change.Status != nil:
		err = s.o.Client.Status().Patch(ctx, vm, client.RawPatch(types.JSONPatchType, change.Status),
			&client.SubResourcePatchOptions{PatchOptions: *po})
	}
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), "test operation does not apply"):
		return apierrors.NewConflict(vmstate.Resource, vm.Name, err)
	}
	return apierrors.NewInternalError(err)
}

// decodeBody decodes a YAML or JSON body into into (none leaves it as it
// is), or gives KubeVirt's 400 (subresource.go decodeBody).
func decodeBody(r *http.Request, into any) error {
	if r.Body == nil {
		return nil
	}
	if err := yaml.NewYAMLOrJSONDecoder(r.Body, 1024).Decode(into); err != nil && err != io.EOF {
		return apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %s", err))
	}
	return nil
}
