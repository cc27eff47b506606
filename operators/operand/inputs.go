package operand

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Inputs are what a component's roles take from the cluster besides their
// CR, the namespace and the images: the #RolesOf `inputs` of its
// definition. Upstream operators read such state too (cdi-operator's
// CDIConfig the StorageClasses, hostpath-provisioner-operator the nodes of
// its DaemonSet); converge's CDI roles read the HostPathProvisioners'
// storage pools, which the cdi-importer agent serves.
type Inputs struct {
	// CRDs are the CRDs of the kinds Read and Watch use; the operator
	// starts once they are established too.
	CRDs []string
	// Watch are the kinds whose changes re-derive every CR of the
	// operator (its own kind included when a CR's roles depend on the
	// other CRs).
	Watch []schema.GroupVersionKind
	// Read gives the value of the definition's `inputs` for cr, reading
	// through r (the manager's cache). An error fails the reconcile, which
	// is retried with backoff.
	Read func(ctx context.Context, r client.Reader, cr *unstructured.Unstructured) (map[string]any, error)
}

// crds gives the CRDs the operator waits for: its own and its inputs'.
func (op Operator) crds() []string {
	out := []string{op.CRD}
	if op.Inputs != nil {
		out = append(out, op.Inputs.CRDs...)
	}
	return out
}

// readInputs gives cr's inputs, nil when the operator takes none.
func (r *Reconciler) readInputs(ctx context.Context, cr *unstructured.Unstructured) (map[string]any, error) {
	if r.op.Inputs == nil || r.op.Inputs.Read == nil {
		return nil, nil
	}
	return r.op.Inputs.Read(ctx, r.crs, cr)
}

// everyCR maps any event to a request for every CR of the operator's
// kind, read through crs: an input changed for all of them.
func (r *Reconciler) everyCR() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(r.op.GVK.GroupVersion().WithKind(r.op.GVK.Kind + "List"))
		if err := r.crs.List(ctx, list); err != nil {
			r.log.Error(err, "listing the CRs to re-derive after an input changed")
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	})
}
