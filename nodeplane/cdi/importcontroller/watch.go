package importcontroller

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/crdwait"
)

// EnqueueSameName enqueues the object of the event's namespace/name: the
// PVC of a DataVolume has the DataVolume's name, so watching PVCs with it
// enqueues their DataVolume (a binding makes it importable or uploadable).
var EnqueueSameName = handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
})

// WaitForCRD polls r every poll until the DataVolume CRD
// (datavolume.CRDName) is established (internal/crdwait), so a node agent
// starts its controllers only once the controller side has installed it.
// It gives true then, false when ctx ended first.
func WaitForCRD(ctx context.Context, r client.Reader, poll time.Duration) bool {
	return crdwait.Wait(ctx, r, poll, datavolume.CRDName)
}
