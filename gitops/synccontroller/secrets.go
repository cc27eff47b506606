package synccontroller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// secretNames lists the Secrets, in its namespace, that s reads on a
// reconcile: the source's credentials, the verification keys, the
// target's kubeconfig and the receiver's token (a rotated token moves the
// hook path at once).
func secretNames(s *v1alpha1.Sync) []string {
	var out []string
	if r := s.Spec.Source.SecretRef; r != nil {
		out = append(out, r.Name)
	}
	if v := s.Spec.Source.Verify; v != nil {
		out = append(out, v.SecretRef.Name)
	}
	if t := s.Spec.Target; t != nil {
		out = append(out, t.KubeConfig.SecretRef.Name)
	}
	if rc := s.Spec.Receiver; rc != nil {
		out = append(out, rc.SecretRef.Name)
	}
	return out
}

// secretUsers maps a Secret to the Syncs of its namespace that read it,
// so that a rotated or fixed credential is retried at once instead of at
// the next retryInterval (Argo CD reacts to repository credentials the
// same way). It lists Syncs from the manager's cache.
func (r *Reconciler) secretUsers(ctx context.Context, o client.Object) []reconcile.Request {
	syncs := &v1alpha1.SyncList{}
	if err := r.Client.List(ctx, syncs, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing the Syncs of a changed Secret", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	var out []reconcile.Request
	for i := range syncs.Items {
		s := &syncs.Items[i]
		for _, n := range secretNames(s) {
			if n == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
				break
			}
		}
	}
	return out
}
