package uploadserver

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/endpoint"
)

// Setup adds the node's upload role to mgr (scheme with core/v1 and
// cdi.kubevirt.io/v1beta1): the HTTPS server (Run) and, once the
// DataVolume CRD is established, the ReadyMarker controller. The
// cdi-importer agent calls it next to importcontroller.Setup with the same
// importcontroller.Options in opts.Volumes.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.Volumes.NodeName == "" || len(opts.Volumes.Pools) == 0 {
		return errors.New("upload server: node name and at least one storage pool are required")
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return Run(ctx, mgr.GetClient(), mgr.GetAPIReader(), opts)
	})); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !importcontroller.WaitForCRD(ctx, mgr.GetAPIReader(), opts.CRDPoll) {
			return nil
		}
		m := &ReadyMarker{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: opts}
		if err := ctrl.NewControllerManagedBy(mgr).
			Named("cdi-upload-ready").
			For(&cdiv1.DataVolume{}).
			Watches(&corev1.PersistentVolumeClaim{}, importcontroller.EnqueueSameName).
			WithOptions(controller.Options{SkipNameValidation: &opts.SkipNameValidation}).
			Complete(m); err != nil {
			return fmt.Errorf("upload server: building the ReadyMarker controller: %w", err)
		}
		<-ctx.Done()
		return nil
	}))
}

// Run serves the upload Server on opts.BindAddress over TLS with a fresh
// self-signed certificate for the advertised host, published with the
// address on the Node as the nodeendpoint.Upload endpoint (endpoint.Run),
// until ctx ends; then it returns nil. c writes DataVolume status and the Node annotations; r
// reads fresh objects. Errors name what failed.
func Run(ctx context.Context, c client.Client, r client.Reader, opts Options) error {
	ro := endpoint.RunOptions{NodeName: opts.Volumes.NodeName, BindAddress: opts.BindAddress,
		AdvertiseAddress: opts.AdvertiseAddress, CertLifetime: opts.CertLifetime, Log: opts.Log}
	return endpoint.Run(ctx, c, r, nodeendpoint.Upload, ro, NewServer(c, r, opts))
}
