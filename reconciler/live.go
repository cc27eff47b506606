package reconciler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/reconciler/inventory"
)

// LiveObject is what converge needs to know of an object in the cluster.
type LiveObject struct {
	ResourceVersion string
	UID             types.UID
}

// Live is a snapshot of the objects carrying converge's ownership labels,
// by inventory ID. Kinds whose API is not served yet are empty.
type Live map[string]LiveObject

// ReadLive lists, metadata only, every object of the given kinds that
// carries the owner labels of the HC name/namespace. Reading through a
// cache-backed client (controller) costs no API requests; through a
// direct client it costs one LIST per kind.
func ReadLive(ctx context.Context, r client.Reader, gvks []schema.GroupVersionKind, owner map[string]string) (Live, error) {
	live := Live{}
	for _, gvk := range gvks {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.List(ctx, list, client.MatchingLabels(owner)); err != nil {
			if meta.IsNoMatchError(err) {
				continue // the CRD is not installed yet
			}
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			it := &list.Items[i]
			id := inventory.IDOf(it.GetNamespace(), it.GetName(), gvk.GroupKind())
			live[id] = LiveObject{ResourceVersion: it.GetResourceVersion(), UID: it.GetUID()}
		}
	}
	return live, nil
}
