package virtoperator

import (
	"context"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/virt/virtapi"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// Name is the operator's name: field manager converge-virt-operator, owner
// labels virt-operator.converge.dev/name|namespace.
const Name = "virt-operator"

// The roles the operator gates (operand.Role names).
const (
	// RoleVirtController is virt-controller's: the VM controller, the VMI
	// scheduler and node health.
	RoleVirtController = "virt-controller"
	// RoleVMValidation is the VM validation webhook's (virt-api's
	// validating webhooks).
	RoleVMValidation = "vm-validation"
	// RoleVirtAPI is the aggregated API subresources.kubevirt.io's
	// (operators/virt/virtapi: virt-api's subresources).
	RoleVirtAPI = "virt-api"
)

// GVK is the KubeVirt CR's kind; CRD its CustomResourceDefinition.
var GVK = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "KubeVirt"}

// CRD names the KubeVirt CRD.
const CRD = "kubevirts.kubevirt.io"

// Operator gives the operand.Operator of KubeVirt CRs: namespaced (its
// roles go to its namespace, as virt-operator installs KubeVirt in its
// CR's), a singleton (a second native KubeVirt is Degraded
// ExistingDeployment), the hostpath CSI driver's pools as inputs (Inputs),
// KubeVirt's status fields (phase, operatorVersion,
// targetKubeVirtVersion, observedKubeVirtVersion; targetKubeVirtRegistry
// and observedKubeVirtRegistry: the node image's registry and repository
// path; defaultArchitecture amd64), and the roles: virt-controller when
// virtController, the VM validation webhook when vmValidation (its Stop
// deletes the ValidatingWebhookConfiguration through c, so that no
// failurePolicy Fail hook is left calling a handler the restarted process
// no longer holds back), and the virt-api when virtAPI (its Stop deletes
// the APIService, so that the API server stops routing to a server the
// restarted process does not register).
func Operator(nodeImage string, virtController, vmValidation, virtAPI bool, c client.Client) operand.Operator {
	registry := imageRegistry(nodeImage)
	op := operand.Operator{
		Name: Name, GVK: GVK, CRD: CRD, Singleton: true, Inputs: Inputs(),
		Status: operand.StatusFields{Phase: "phase", OperatorVersion: "operatorVersion",
			TargetVersion: "targetKubeVirtVersion", ObservedVersion: "observedKubeVirtVersion",
			Extra: func(r operand.Report) map[string]any {
				out := map[string]any{"targetKubeVirtRegistry": registry, "defaultArchitecture": "amd64"}
				if r.ObservedVersion != "" {
					out["observedKubeVirtRegistry"] = registry
				}
				return out
			}},
	}
	if virtController {
		op.Roles = append(op.Roles, operand.Role{Name: RoleVirtController})
	}
	if vmValidation {
		op.Roles = append(op.Roles, operand.Role{Name: RoleVMValidation, Stop: operand.DeleteOnStop(c,
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: vmadmission.ConfigurationName}})})
	}
	if virtAPI {
		op.Roles = append(op.Roles, operand.Role{Name: RoleVirtAPI, Stop: func(ctx context.Context) error {
			return virtapi.Unregister(ctx, c)
		}})
	}
	return op
}

// imageRegistry gives the registry and repository path of an image
// reference without its last path element, tag and digest
// ("ghcr.io/converge-dev/converge-node:v1" → "ghcr.io/converge-dev"), as
// KubeVirt's registry fields hold where its images come from.
func imageRegistry(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	i := strings.LastIndex(ref, "/")
	if i < 0 {
		return ""
	}
	return ref[:i]
}
