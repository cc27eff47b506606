package uploadserver

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
)

// updateStatus re-reads DataVolume key from r, applies mutate (false:
// write nothing) and writes the status subresource, retrying conflicts
// (importcontroller.UpdateStatus).
func updateStatus(ctx context.Context, c client.Client, r client.Reader, key types.NamespacedName, mutate func(*cdiv1.DataVolume) bool) error {
	_, err := importcontroller.UpdateStatus(ctx, c, r, key, mutate)
	return err
}
