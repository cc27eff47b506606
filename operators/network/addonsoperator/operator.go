package addonsoperator

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/operators/network/macpool"
	"github.com/converge-dev/converge/operators/operand"
)

// Name is the operator's name: field manager
// converge-network-addons-operator, owner labels
// network-addons-operator.converge.dev/name|namespace.
const Name = "network-addons-operator"

// RoleMACPool is the MAC pool's role (operand.Role name).
const RoleMACPool = "mac-pool"

// Operator gives the operand.Operator of NetworkAddonsConfigs:
// cluster-scoped (its roles go to the operator's namespace), a singleton,
// CNAO's status fields (operatorVersion, targetVersion, observedVersion;
// no phase), and, when macPool, the MAC pool's role, wanted by a
// NetworkAddonsConfig with spec.kubeMacPool (CNAO deploys kubemacpool only
// then), whose Stop deletes the pool's MutatingWebhookConfiguration
// through c.
func Operator(macPool bool, c client.Client) operand.Operator {
	op := operand.Operator{
		Name: Name, GVK: macpool.NetworkAddonsConfigGVK, CRD: macpool.NetworkAddonsConfigCRD,
		ClusterScoped: true, Singleton: true,
		Status: operand.StatusFields{OperatorVersion: "operatorVersion", TargetVersion: "targetVersion", ObservedVersion: "observedVersion"},
	}
	if macPool {
		op.Roles = append(op.Roles, operand.Role{
			Name: RoleMACPool,
			Wants: func(cr *unstructured.Unstructured) bool {
				_, found, _ := unstructured.NestedFieldNoCopy(cr.Object, "spec", "kubeMacPool")
				return found
			},
			Stop: operand.DeleteOnStop(c,
				&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: macpool.ConfigurationName}}),
		})
	}
	return op
}
