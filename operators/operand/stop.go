package operand

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeleteOnStop gives a Role.Stop that deletes obj (by its kind and name)
// through c, an object already gone counting as done: the webhook
// configuration a role registered, removed when the role stops.
func DeleteOnStop(c client.Client, obj client.Object) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
}
