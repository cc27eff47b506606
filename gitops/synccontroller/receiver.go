package synccontroller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/receiver"
)

// ReceiverFailedReason is the reason of the Warning event of a Sync whose
// spec.receiver cannot be served: its Secret is missing, has no
// non-empty "token", or the token gives another Sync's hook path.
const ReceiverFailedReason = "ReceiverFailed"

// updateReceiver brings the Receivers index and status.webhookPath of s
// in line with spec.receiver: without a receiver (or without an index)
// the path is dropped; with one the Secret is read (uncached, as every
// Secret) and the Sync's path, receiver.Path of its token, indexed and
// published. A Secret that is missing or has no token, or a token whose
// path another Sync holds, drops the path and is reported as a Warning
// event; an error reading the Secret keeps the path and token indexed
// before (the next reconcile reads it again).
func (r *Reconciler) updateReceiver(ctx context.Context, s *v1alpha1.Sync) {
	key := client.ObjectKeyFromObject(s)
	if r.Receivers == nil || s.Spec.Receiver == nil {
		r.forgetReceiver(key)
		s.Status.WebhookPath = ""
		return
	}
	sk := types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.Receiver.SecretRef.Name}
	sec := &corev1.Secret{}
	err := r.APIReader.Get(ctx, sk, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(fmt.Errorf("Sync %s: reading Secret %s (spec.receiver.secretRef): %w", key, sk, err),
			"receiver keeps its path until the Secret can be read")
		return
	}
	path := ""
	switch tok := sec.Data[receiver.TokenKey]; {
	case err != nil:
		err = fmt.Errorf("Sync %s: Secret %s (spec.receiver.secretRef): %w", key, sk, err)
	case len(tok) == 0:
		err = fmt.Errorf("Sync %s: Secret %s (spec.receiver.secretRef): want a non-empty key %q", key, sk, receiver.TokenKey)
	default:
		path, err = r.Receivers.Set(key, tok)
	}
	if err != nil {
		r.forgetReceiver(key)
		s.Status.WebhookPath = ""
		r.event(s, "", corev1.EventTypeWarning, ReceiverFailedReason, "push receiver disabled: "+err.Error())
		return
	}
	s.Status.WebhookPath = path
}

// forgetReceiver drops the hook path of key from the index, if any.
func (r *Reconciler) forgetReceiver(key types.NamespacedName) {
	if r.Receivers != nil {
		r.Receivers.Delete(key)
	}
}
