package cdiupload

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// updateStatus re-reads DataVolume key from r, applies mutate (false:
// write nothing) and writes the status subresource, retrying conflicts.
func updateStatus(ctx context.Context, c client.Client, r client.Reader, key types.NamespacedName, mutate func(*cdiv1.DataVolume) bool) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		dv := &cdiv1.DataVolume{}
		if err := r.Get(ctx, key, dv); err != nil {
			return err
		}
		old := dv.Status.DeepCopy()
		if !mutate(dv) || equality.Semantic.DeepEqual(*old, dv.Status) {
			return nil
		}
		return c.Status().Update(ctx, dv)
	})
	if err != nil {
		return fmt.Errorf("DataVolume %s: writing status: %w", key, err)
	}
	return nil
}
