package virtapi

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/aggregated"
)

// APIServiceName is the APIService of subresources.kubevirt.io/v1, named
// as virt-operator names KubeVirt's (v1.subresources.kubevirt.io).
const APIServiceName = "v1." + "subresources.kubevirt.io"

// Register creates or updates the APIService of subresources.kubevirt.io/v1
// (aggregated.Register, virt-operator's priorities: groupPriorityMinimum
// 1000, versionPriority 15) routing to port of the Service svc and trusting
// caBundle.
func Register(ctx context.Context, c client.Client, svc types.NamespacedName, port int32, caBundle []byte, fieldOwner string) error {
	return aggregated.Register(ctx, c, API(Options{}), svc, port, caBundle, fieldOwner)
}

// Unregister deletes the APIService (aggregated.Unregister), so that the
// API server stops routing subresources.kubevirt.io once the role is gone.
func Unregister(ctx context.Context, c client.Client) error {
	return aggregated.Unregister(ctx, c, APIServiceName)
}
