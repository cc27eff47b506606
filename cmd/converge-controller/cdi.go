package main

import (
	"context"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/aggregated"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/cdi/cdioperator"
	"github.com/converge-dev/converge/operators/cdi/clonetoken"
	"github.com/converge-dev/converge/operators/cdi/dvadmission"
	"github.com/converge-dev/converge/operators/cdi/uploadapi"
	"github.com/converge-dev/converge/operators/cdi/uploadproxy"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/reconciler"
)

// cdiAPIFlags are the flags of the cdi-apiserver role's servers: the
// aggregated API upload.cdi.kubevirt.io and the upload proxy.
type cdiAPIFlags struct {
	apiAddr   string
	apiPort   int
	proxyAddr string
}

func (f *cdiAPIFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.apiAddr, "cdi-api-bind-address", ":8444", "address the aggregated API upload.cdi.kubevirt.io (UploadTokenRequest, CDI's apiserver) is served on")
	fs.IntVar(&f.apiPort, "cdi-api-service-port", 8444, "port of --webhook-service-name in front of --cdi-api-bind-address, which the APIService v1beta1.upload.cdi.kubevirt.io names")
	fs.StringVar(&f.proxyAddr, "uploadproxy-bind-address", ":8445", "address of the upload proxy (CDI's cdi-uploadproxy: /v1beta1/upload, upload-async, upload-form; the Service port https-uploadproxy)")
}

// setupCDIAPI adds the cdi-apiserver role's servers to mgr, both held
// until the CDI operator's cdi-apiserver role opens (gates): the
// aggregated API upload.cdi.kubevirt.io, which signs upload tokens with
// the key kept in keysNS, registered behind svc; and the upload proxy,
// which checks them and routes uploads to the volumes' nodes. Both serve
// the webhook certificate (certs); without it or the Service nothing is
// served and the reason is logged.
func setupCDIAPI(mgr manager.Manager, f cdiAPIFlags, gates *operand.Gates, certs *webhook.Manager, svc *types.NamespacedName, kubeconfig, keysNS string) error {
	if certs == nil || svc == nil {
		ctrl.Log.Info("upload.cdi.kubevirt.io and the upload proxy not served: they need the webhook Service (--webhook-service-name/--webhook-service-namespace) and the issued certificate (no --webhook-cert-dir)")
		return nil
	}
	gate := func(ctx context.Context) error { return gates.Wait(ctx, cdioperator.RoleAPIServer) }
	keys := uploadtoken.DefaultOptions()
	keys.KeySecret.Namespace, keys.PublicKeys.Namespace = keysNS, keysNS
	if err := uploadapi.Setup(mgr, uploadapi.SetupOptions{Keys: keys, SetupOptions: aggregated.SetupOptions{
		BindAddress: f.apiAddr, Service: *svc, ServicePort: int32(f.apiPort), Certs: certs,
		Kubeconfig: kubeconfig, FieldOwner: reconciler.FieldManager, Gate: gate}}); err != nil {
		return err
	}
	return uploadproxy.Setup(mgr, uploadproxy.SetupOptions{BindAddress: f.proxyAddr, Certs: certs, PublicKeys: keys.PublicKeys, Gate: gate})
}

// newCloneTokens gives the clone tokens of cross-namespace clones, signed
// with the upload token key kept in keysNS (one key pair, as CDI's
// apiserver signs both) through an uncached client.
func newCloneTokens(mgr manager.Manager, keysNS string) (*clonetoken.Tokens, error) {
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("clone tokens: %w", err)
	}
	keys := uploadtoken.DefaultOptions()
	keys.KeySecret.Namespace, keys.PublicKeys.Namespace = keysNS, keysNS
	return clonetoken.New(direct, keys), nil
}

// dvAdmission gives the DataVolume admission webhook (CDI's
// datavolume-mutate: the clone authorization), registered while the
// cdi-apiserver role runs.
func dvAdmission(mgr manager.Manager, tokens *clonetoken.Tokens, gates *operand.Gates) webhook.Configuration {
	return dvadmission.Webhook(dvadmission.Mutator{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Tokens: tokens},
		func(ctx context.Context) error { return gates.Wait(ctx, cdioperator.RoleAPIServer) })
}
