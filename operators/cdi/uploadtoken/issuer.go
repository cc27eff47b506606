package uploadtoken

import (
	"context"
	"crypto/ecdsa"
	"fmt"

	uploadv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
)

// Issuer reconciles UploadTokenRequests: it writes a signed token into
// status.token of each request that has none, and deletes requests
// Options.TokenLifetime + Options.GCAfterExpiry after their creation (a
// request with an empty spec.pvcName gets no token and is collected the
// same way). Deleting a request does not revoke its token: tokens are
// stateless and expire on their own (TokenLifetime from issue).
type Issuer struct {
	// Client reads, updates (status) and deletes UploadTokenRequests.
	Client client.Client
	// Key signs the tokens (EnsureKeys gives it).
	Key *ecdsa.PrivateKey
	// Options give the token lifetime, the collection delay and the clock.
	Options Options
}

// Reconcile handles one UploadTokenRequest; errors (and so requeues) come
// from API calls and name the request.
func (r *Issuer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	utr := &uploadv1.UploadTokenRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, utr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Options.now()
	created := utr.CreationTimestamp.Time
	collect := created.Add(r.Options.TokenLifetime + r.Options.GCAfterExpiry)
	if !now.Before(collect) {
		if err := r.Client.Delete(ctx, utr, client.Preconditions{UID: &utr.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("UploadTokenRequest %s: deleting after its token expired: %w", req, err)
		}
		return ctrl.Result{}, nil
	}
	if utr.Status.Token == "" && utr.Spec.PvcName != "" {
		// valid from now: a request seen late still gets a full lifetime
		tok, err := tokenapi.Sign(r.Key, tokenapi.Claims{Operation: tokenapi.OperationUpload, Name: utr.Spec.PvcName, Namespace: utr.Namespace,
			Resource: tokenapi.PVCResource, IssuedAt: now, Expiry: now.Add(r.Options.TokenLifetime)})
		if err != nil {
			return ctrl.Result{}, err
		}
		utr.Status.Token = tok
		if err := r.Client.Status().Update(ctx, utr); err != nil {
			return ctrl.Result{}, fmt.Errorf("UploadTokenRequest %s: writing status.token: %w", req, client.IgnoreNotFound(err))
		}
	}
	return ctrl.Result{RequeueAfter: collect.Sub(now)}, nil
}
