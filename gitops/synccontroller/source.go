package synccontroller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/source"
)

// sourceError is a failure to build the source.Source of a Sync from its
// spec and Secrets.
type sourceError struct {
	reason string
	// stalled is false only when the Secret could not be read for a
	// reason a retry may fix (not a missing or malformed Secret).
	stalled bool
	err     error
}

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// source builds the source.Source of s: URL and ref, the credentials of
// spec.source.secretRef (source.AuthFromSecret, Flux's keys), the
// verification of spec.source.verify (source.VerificationFromSecret) and
// spec.source.timeout. Secrets are read through the API reader, never
// cached.
func (r *Reconciler) source(ctx context.Context, s *v1alpha1.Sync) (source.Source, error) {
	src := source.Source{URL: s.Spec.Source.URL, Owner: s.Namespace + "/" + s.Name}
	if ref := s.Spec.Source.Ref; ref != nil {
		src.Ref = source.Ref{Branch: ref.Branch, Tag: ref.Tag, SemVer: ref.SemVer, Commit: ref.Commit}
	}
	if t := s.Spec.Source.Timeout; t != nil {
		src.Timeout = t.Duration
	}
	if ref := s.Spec.Source.SecretRef; ref != nil {
		data, err := r.secretData(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ref.Name}, "spec.source.secretRef")
		if err != nil {
			return src, &sourceError{reason: v1alpha1.FetchFailedReason, stalled: apierrors.IsNotFound(err), err: err}
		}
		if src.Auth, err = source.AuthFromSecret(data); err != nil {
			return src, &sourceError{reason: v1alpha1.AuthenticationFailedReason, stalled: true,
				err: fmt.Errorf("spec.source.secretRef Secret %s/%s: %w", s.Namespace, ref.Name, err)}
		}
	}
	if v := s.Spec.Source.Verify; v != nil {
		data, err := r.secretData(ctx, types.NamespacedName{Namespace: s.Namespace, Name: v.SecretRef.Name}, "spec.source.verify.secretRef")
		if err != nil {
			return src, &sourceError{reason: v1alpha1.VerificationFailedReason, stalled: apierrors.IsNotFound(err), err: err}
		}
		if src.Verify, err = source.VerificationFromSecret(v.Mode, data); err != nil {
			return src, &sourceError{reason: v1alpha1.VerificationFailedReason, stalled: true,
				err: fmt.Errorf("spec.source.verify.secretRef Secret %s/%s: %w", s.Namespace, v.SecretRef.Name, err)}
		}
	}
	return src, nil
}

// secretData reads the data of the Secret key, named field in errors.
func (r *Reconciler) secretData(ctx context.Context, key types.NamespacedName, field string) (map[string][]byte, error) {
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s: Secret %s not found: %w", field, key, err)
		}
		return nil, fmt.Errorf("%s: reading Secret %s: %w", field, key, err)
	}
	return sec.Data, nil
}
