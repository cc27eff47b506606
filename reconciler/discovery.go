package reconciler

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
)

// retryNoMatch calls send until it returns anything but a "no matches
// for kind" error (meta.IsNoMatchError), or until wait has passed, every
// interval; it returns send's last error (ctx's error when ctx ends
// first). Each failed call has made controller-runtime's REST mapper
// reload the group's discovery, so a kind the API server has begun to
// serve since (a CRD just established, discovery rebuilt after a
// restart) is found by the next call. A kind that stays unknown fails
// after wait with the mapper's error.
func retryNoMatch(ctx context.Context, wait, interval time.Duration, send func() error) error {
	err := send()
	if !meta.IsNoMatchError(err) || wait <= 0 {
		return err
	}
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	t := time.NewTicker(interval)
	defer t.Stop()
	for meta.IsNoMatchError(err) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		err = send()
	}
	return err
}
