package virtapi

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serve routes an authenticated, authorized request below
// /apis/subresources.kubevirt.io/v1/ by the RequestInfo the generic
// server's filters parsed (namespace, resource, name, subresource): the
// paths KubeVirt's virt-api serves, each with its method; anything else is
// 404 (405 for another method).
func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	info, ok := request.RequestInfoFrom(r.Context())
	verb, served := subresources[info.Resource][info.Subresource]
	if !ok || !info.IsResourceRequest || info.Namespace == "" || info.Name == "" || !served {
		writeError(w, r, apierrors.NewNotFound(GroupVersion.WithResource(info.Resource).GroupResource(), info.Name))
		return
	}
	method := map[string]string{"update": http.MethodPut, "get": http.MethodGet}[verb]
	if r.Method != method {
		writeError(w, r, apierrors.NewMethodNotSupported(GroupVersion.WithResource(info.Resource+"/"+info.Subresource).GroupResource(), r.Method))
		return
	}
	switch info.Resource + "/" + info.Subresource {
	case "virtualmachines/start", "virtualmachines/stop", "virtualmachines/restart":
		s.lifecycle(w, r, info.Subresource, info.Namespace, info.Name)
	case "virtualmachineinstances/console":
		s.console(w, r, info.Namespace, info.Name)
	case "virtualmachineinstances/vnc":
		s.refuseVMI(w, r, info.Namespace, info.Name, func(*kubevirtv1.VirtualMachineInstance) error {
			// vmiHasDisplay (pkg/virt-api/rest/vnc.go) for a VMI with
			// autoattachGraphicsDevice false: converge's domains have no
			// graphics device (api/vmisupport).
			return apierrors.NewBadRequest("No graphics devices are present.")
		})
	default: // guestosinfo, userlist, filesystemlist
		s.refuseVMI(w, r, info.Namespace, info.Name, func(vmi *kubevirtv1.VirtualMachineInstance) error {
			// subresource.go GuestOSInfo, UserList, FilesystemList:
			// converge runs no guest agent, so it is never connected.
			if vmi.Status.Phase != kubevirtv1.Running {
				return apierrors.NewConflict(vmiResource, vmi.Name, fmt.Errorf("VMI is not running"))
			}
			return apierrors.NewConflict(vmiResource, vmi.Name, fmt.Errorf("VMI does not have guest agent connected"))
		})
	}
}

// vmiResource is virtualmachineinstance.kubevirt.io, as KubeVirt's errors
// about a VMI name it (v1.Resource("virtualmachineinstance")).
var vmiResource = kubevirtv1.Resource("virtualmachineinstance")

// refuseVMI answers a request on VMI ns/name that converge never grants:
// 404 when the VMI does not exist, else refusal's error.
func (s *server) refuseVMI(w http.ResponseWriter, r *http.Request, ns, name string, refusal func(*kubevirtv1.VirtualMachineInstance) error) {
	vmi, err := s.fetchVMI(r.Context(), ns, name)
	if err == nil {
		err = refusal(vmi)
	}
	writeError(w, r, err)
}

// fetchVMI reads VMI ns/name as KubeVirt's FetchVirtualMachineInstance:
// 404 NotFound, else 500 naming it.
func (s *server) fetchVMI(ctx context.Context, ns, name string) (*kubevirtv1.VirtualMachineInstance, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(vmiResource, name)
		}
		return nil, apierrors.NewInternalError(fmt.Errorf("unable to retrieve vmi [%s]: %v", name, err))
	}
	return vmi, nil
}

// writeError answers with err as a metav1.Status (KubeVirt's writeError):
// a StatusError keeps its code, anything else is 500.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	responsewriters.ErrorNegotiated(err, codecs, GroupVersion, w, r)
}
