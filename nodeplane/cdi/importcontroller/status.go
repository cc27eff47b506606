package importcontroller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UpdateStatus re-reads DataVolume key through r, applies mutate to its
// status and writes it through c's status subresource, retrying on
// conflicts with the DataVolume controller. It gives the written (or,
// when nothing changed, the read) object. mutate may return false to write
// nothing (the DataVolume is no longer this agent's to update). The error
// is "DataVolume ns/name: writing status: …". nodeplane/cdi/uploadserver uses it
// too.
func UpdateStatus(ctx context.Context, c client.Client, r client.Reader, key types.NamespacedName, mutate func(*cdiv1.DataVolume) bool) (*cdiv1.DataVolume, error) {
	var out *cdiv1.DataVolume
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		dv := &cdiv1.DataVolume{}
		if err := r.Get(ctx, key, dv); err != nil {
			return err
		}
		old := dv.Status.DeepCopy()
		if !mutate(dv) || equality.Semantic.DeepEqual(*old, dv.Status) {
			out = dv
			return nil
		}
		if err := c.Status().Update(ctx, dv); err != nil {
			return err
		}
		out = dv
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("DataVolume %s: writing status: %w", key, err)
	}
	return out, nil
}
