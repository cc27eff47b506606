package virtoperator

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/operators/cdi/cdioperator"
	"github.com/converge-dev/converge/operators/operand"
)

// Inputs are the virt roles' inputs (components/virt #Roles inputs), read
// as the CDI operator reads its own (cdioperator.Operator): pools, the
// storage pools of the native HostPathProvisioner that the hostpath CSI
// driver serves (cdioperator.Pools: those with a host path, in its order),
// which the VM agent mounts to resolve PVC and dataVolume disks. A change
// of any HostPathProvisioner re-derives the KubeVirt; the operator waits
// for the HostPathProvisioner CRD, which the graph installs with the
// others.
func Inputs() *operand.Inputs {
	return &operand.Inputs{
		CRDs:  []string{cdioperator.HostPathProvisionerCRD},
		Watch: []schema.GroupVersionKind{cdioperator.HostPathProvisioner},
		Read: func(ctx context.Context, r client.Reader, _ *unstructured.Unstructured) (map[string]any, error) {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(cdioperator.HostPathProvisioner.GroupVersion().WithKind(cdioperator.HostPathProvisioner.Kind + "List"))
			if err := r.List(ctx, list); err != nil {
				return nil, fmt.Errorf("listing the HostPathProvisioners: %w", err)
			}
			return map[string]any{"pools": cdioperator.Pools(list.Items)}, nil
		},
	}
}
