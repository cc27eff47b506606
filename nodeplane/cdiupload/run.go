package cdiupload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/converge-dev/converge/datavolume"
	"github.com/converge-dev/converge/nodeplane/vm/console"
)

// Setup adds the node's upload role to mgr (scheme with core/v1 and
// cdi.kubevirt.io/v1beta1): the HTTPS server (Run) and, once the
// DataVolume CRD is established, the ReadyMarker controller. The
// cdi-importer agent calls it next to cdiimport.Setup with the same
// cdiimport.Options in opts.Volumes.
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
		for !datavolume.CRDEstablished(ctx, mgr.GetAPIReader(), datavolume.CRDName) {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(opts.CRDPoll):
			}
		}
		m := &ReadyMarker{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: opts}
		byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		})
		if err := ctrl.NewControllerManagedBy(mgr).
			Named("cdi-upload-ready").
			For(&cdiv1.DataVolume{}).
			Watches(&corev1.PersistentVolumeClaim{}, byName).
			WithOptions(controller.Options{SkipNameValidation: &opts.SkipNameValidation}).
			Complete(m); err != nil {
			return fmt.Errorf("upload server: building the ReadyMarker controller: %w", err)
		}
		<-ctx.Done()
		return nil
	}))
}

// Run listens on opts.BindAddress, makes a self-signed serving certificate
// for the advertised host (console.NewServingCert), publishes the Endpoint
// on the Node (Publish) and serves the Server over TLS (console.Serve)
// until ctx ends; then it returns nil. c writes DataVolume status and the
// Node annotations; r reads fresh objects. Errors name what failed.
func Run(ctx context.Context, c client.Client, r client.Reader, opts Options) error {
	l, err := net.Listen("tcp", opts.BindAddress)
	if err != nil {
		return fmt.Errorf("upload server: listen on %s: %w", opts.BindAddress, err)
	}
	defer l.Close()
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: opts.Volumes.NodeName}, node); err != nil {
		return fmt.Errorf("upload server: Node %s: %w", opts.Volumes.NodeName, err)
	}
	addr, err := console.AdvertiseAddress(opts.AdvertiseAddress, l.Addr(), node)
	if err != nil {
		return fmt.Errorf("upload server: %w", err)
	}
	host, _, _ := net.SplitHostPort(addr)
	cert, err := console.NewServingCert([]string{host, opts.Volumes.NodeName}, time.Now(), opts.CertLifetime)
	if err != nil {
		return fmt.Errorf("upload server: %w", err)
	}
	if err := Publish(ctx, c, opts.Volumes.NodeName, Endpoint{Address: addr, CertSHA256: cert.SHA256}); err != nil {
		return fmt.Errorf("upload server: %w", err)
	}
	opts.Log.Info("serving DataVolume uploads", "bind", l.Addr().String(), "advertise", addr, "certSHA256", cert.SHA256)
	return console.Serve(ctx, l, cert, NewServer(c, r, opts))
}
