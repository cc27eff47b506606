package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// subresourcesGV is KubeVirt's aggregated API, which `converge vm` calls
// as virtctl does: converge-controller's virt-api serves it in native mode
// (operators/virt/virtapi), KubeVirt's virt-api in external mode.
var subresourcesGV = schema.GroupVersion{Group: "subresources.kubevirt.io", Version: "v1"}

// subresourcesClient gives a REST client of subresources.kubevirt.io/v1
// on the kubeconfig's cluster.
func (g *globals) subresourcesClient() (*rest.RESTClient, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	cfg.GroupVersion, cfg.APIPath = &subresourcesGV, "/apis"
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(cfg)
}

func newVM(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vm",
		Short: "Start, stop, restart a VirtualMachine or attach to its serial console (virtctl's verbs)",
	}
	cmd.AddCommand(newVMLifecycle(g, "start"), newVMLifecycle(g, "stop"), newVMLifecycle(g, "restart"), newVMConsole(g))
	return cmd
}

// newVMLifecycle builds `converge vm start|stop|restart NAME`.
func newVMLifecycle(g *globals, verb string) *cobra.Command {
	var ns string
	long := map[string]string{
		"start": `start calls KubeVirt's start subresource of a VirtualMachine
(subresources.kubevirt.io, as virtctl start does; converge-controller serves
it in native mode, KubeVirt's virt-api in external mode): a Halted VM
gets runStrategy Always; a Manual or RerunOnFailure VM gets a Start request in
status.stateChangeRequests (Stop then Start when its last VMI ended). Always
and Once VMs refuse manual starts; a VM whose VMI runs is "already running".`,
		"stop": `stop calls KubeVirt's stop subresource of a VirtualMachine: an Always or
Once VM gets runStrategy Halted; a Manual or RerunOnFailure VM gets a Stop
request for its VMI in status.stateChangeRequests.`,
		"restart": `restart calls KubeVirt's restart subresource of a VirtualMachine, which
replaces its VMI: Stop (of the current VMI) then Start in status.stateChangeRequests.
Halted and Once VMs refuse restarts.`,
	}[verb]
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a VirtualMachine (KubeVirt's " + verb + " subresource)",
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rc, err := g.subresourcesClient()
			if err != nil {
				return err
			}
			if err := changeVM(cmd.Context(), rc, verb, ns, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "VM %s/%s was scheduled to %s\n", ns, args[0], verb)
			return nil
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "default", "namespace of the VirtualMachine")
	return cmd
}

// changeVM calls KubeVirt's verb subresource of the VirtualMachine ns/name
// (PUT /apis/subresources.kubevirt.io/v1/namespaces/NS/virtualmachines/
// NAME/VERB with empty options, as virtctl does), whose server applies
// KubeVirt's rules (pkg/virt-api/rest/lifecycle.go). Errors name the
// VirtualMachine and give the server's reason.
func changeVM(ctx context.Context, rc *rest.RESTClient, verb, ns, name string) error {
	err := rc.Put().Namespace(ns).Resource("virtualmachines").Name(name).SubResource(verb).
		SetHeader("Content-Type", "application/json").Body([]byte("{}")).Do(ctx).Error()
	if err == nil {
		return nil
	}
	return subresourceError("VirtualMachine", "virtualmachine", ns, name, err)
}

// subresourceError words an error of a subresources.kubevirt.io request
// about the object kind ns/name (resource: KubeVirt's singular in its
// errors): not found, the API not served, or the server's reason without
// the "Operation cannot be fulfilled …" and "Internal error occurred"
// prefixes of KubeVirt's Status messages.
func subresourceError(kind, resource, ns, name string, err error) error {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return fmt.Errorf("%s %s/%s: %w", kind, ns, name, err)
	}
	st := se.Status()
	switch {
	case st.Code == http.StatusNotFound && st.Details != nil && st.Details.Kind == resource:
		return fmt.Errorf("%s %s/%s not found", kind, ns, name)
	case st.Code == http.StatusNotFound:
		return fmt.Errorf("the cluster does not serve subresources.kubevirt.io/v1 (KubeVirt's virt-api; converge-controller serves it while a native KubeVirt exists): %s %s/%s: %s", kind, ns, name, st.Message)
	}
	msg := strings.TrimPrefix(st.Message, fmt.Sprintf("Operation cannot be fulfilled on %s.kubevirt.io %q: ", resource, name))
	msg = strings.TrimPrefix(msg, "Internal error occurred: ")
	return fmt.Errorf("%s %s/%s: %s", kind, ns, name, msg)
}
