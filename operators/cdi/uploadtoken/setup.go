package uploadtoken

import (
	"context"
	"fmt"

	uploadv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/crdwait"
)

// CRDName is the UploadTokenRequest CRD's name.
const CRDName = "uploadtokenrequests.upload.cdi.kubevirt.io"

// Setup adds the Issuer to mgr, whose scheme must know
// upload.cdi.kubevirt.io/v1beta1 (uploadv1.AddToScheme) and core/v1. It
// waits (polling opts.CRDPoll, internal/crdwait) for the UploadTokenRequest
// CRD to be established, as datavolume.Setup does for DataVolumes, and
// for opts.Gate when set, then ensures the signing key (EnsureKeys) and
// starts the controller. RBAC:
// get, list, watch, delete uploadtokenrequests and update
// uploadtokenrequests/status; get, create secrets and get, create, update
// configmaps in the keys' namespace (which must exist).
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.TokenLifetime <= 0 {
		return fmt.Errorf("upload token issuer: token lifetime %v: expected > 0", opts.TokenLifetime)
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !crdwait.Wait(ctx, mgr.GetAPIReader(), opts.CRDPoll, CRDName) {
			return nil
		}
		if opts.Gate != nil {
			if err := opts.Gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("upload token issuer: %w", err)
			}
		}
		// uncached: a cached Get would watch every Secret in the cluster
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("upload token issuer: %w", err)
		}
		key, err := EnsureKeys(ctx, direct, opts)
		if err != nil {
			return fmt.Errorf("upload token issuer: %w", err)
		}
		r := &Issuer{Client: mgr.GetClient(), Key: key, Options: opts}
		if err := ctrl.NewControllerManagedBy(mgr).
			Named("upload-token-issuer").
			For(&uploadv1.UploadTokenRequest{}).
			WithOptions(controller.Options{SkipNameValidation: &opts.SkipNameValidation}).
			Complete(r); err != nil {
			return fmt.Errorf("upload token issuer: building the controller: %w", err)
		}
		ctrl.Log.WithName("upload").Info("issuing upload tokens", "publicKeys", opts.PublicKeys.String())
		<-ctx.Done()
		return nil
	}))
}
