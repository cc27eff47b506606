package reconciler

import (
	"context"
	"fmt"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// immutableMessage matches the API server's and CEL's wording for a
// change to a field that cannot change (ConfigMap/Secret "field is
// immutable when `immutable` is set", PriorityClass "may not be changed
// in an update", Service "may not change once set", StatefulSet "updates
// to statefulset spec for fields other than … are forbidden", CEL
// "is immutable"/"immutable field").
var immutableMessage = regexp.MustCompile(`(?i)is immutable|immutable field|field is immutable|may not be changed|may not change once set|updates to .* are forbidden`)

// isImmutable reports whether err is an apply refused because it changes
// an immutable field. Unlike Flux's ssa errors.IsImmutableError, which
// counts every Invalid as immutable (kubectl's rule), a plain schema
// error does not qualify: recreating cannot fix it and would lose the
// object.
func isImmutable(err error) bool {
	return (apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)) &&
		immutableMessage.MatchString(err.Error())
}

// forceAllowed reports whether desired, or the live object of the same
// identity, carries ForceAnnotation=enabled.
func (p *Pipeline) forceAllowed(ctx context.Context, desired *unstructured.Unstructured) (bool, error) {
	if desired.GetAnnotations()[ForceAnnotation] == Enabled {
		return true, nil
	}
	cur := &metav1.PartialObjectMetadata{}
	cur.SetGroupVersionKind(desired.GroupVersionKind())
	if err := p.Client.Get(ctx, client.ObjectKeyFromObject(desired), cur); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("%s: reading for %s: %w", ssaSubject(desired), ForceAnnotation, err)
	}
	return cur.GetAnnotations()[ForceAnnotation] == Enabled, nil
}

// recreate deletes the object desired names (background propagation),
// waits until it is gone (bounded by Options.WaitTimeout) and applies
// desired. It returns the object the API server returned.
func (p *Pipeline) recreate(ctx context.Context, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(desired.GroupVersionKind())
	cur.SetNamespace(desired.GetNamespace())
	cur.SetName(desired.GetName())
	if err := p.Client.Delete(ctx, cur, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s: deleting to recreate (immutable field changed, %s: %s): %w", ssaSubject(desired), ForceAnnotation, Enabled, err)
	}
	if err := p.waitGone(ctx, cur); err != nil {
		return nil, fmt.Errorf("%s: recreating (immutable field changed): %w", ssaSubject(desired), err)
	}
	applied := desired.DeepCopy()
	if err := p.Client.Patch(ctx, applied, client.Apply, client.FieldOwner(p.Options.fieldManager()), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("%s: apply after delete (recreate): %w", ssaSubject(desired), err)
	}
	return applied, nil
}

// waitGone polls until u is not found, every Options.WaitInterval for at
// most Options.WaitTimeout. The error says what still holds it.
func (p *Pipeline) waitGone(ctx context.Context, u *unstructured.Unstructured) error {
	var last *metav1.PartialObjectMetadata
	err := wait.PollUntilContextTimeout(ctx, p.Options.WaitInterval, p.Options.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		cur := &metav1.PartialObjectMetadata{}
		cur.SetGroupVersionKind(u.GroupVersionKind())
		err := p.Client.Get(ctx, client.ObjectKeyFromObject(u), cur)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		last = cur
		return false, nil // other errors: keep polling until the timeout
	})
	if err != nil {
		msg := fmt.Sprintf("%s still present after %s", ssaSubject(u), p.Options.WaitTimeout)
		if last != nil && len(last.GetFinalizers()) > 0 {
			msg += fmt.Sprintf(" (finalizers %v)", last.GetFinalizers())
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	return nil
}
