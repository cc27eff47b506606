package aggregated

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/webhook"
)

// SetupOptions configure Setup.
type SetupOptions struct {
	// BindAddress is the host:port the server listens on. Required.
	BindAddress string
	// Service and ServicePort are where the API server reaches the server:
	// converge-controller's Service, the port in front of BindAddress.
	// Required.
	Service     types.NamespacedName
	ServicePort int32
	// Certs is the webhook certificate Manager whose certificate the
	// server serves and whose CA the APIService trusts. Required.
	Certs *webhook.Manager
	// Kubeconfig is Options.Kubeconfig (empty: in-cluster).
	Kubeconfig string
	// Gate, when set, holds the APIService's registration until it returns
	// nil (the role's gate: e.g. a native KubeVirt exists).
	Gate func(ctx context.Context) error
	// FieldOwner is the server-side apply field manager of the APIService.
	// Required.
	FieldOwner string
	// Retry is how long a failed registration waits before it tries again
	// (default 5s).
	Retry time.Duration
}

// Setup adds the server of the API newAPI gives to mgr, on every replica
// (each one behind the Service answers): once the certificate Manager has
// a certificate, it listens on BindAddress and serves (Server.Run) until
// the manager stops. newAPI gets a client that reads and writes straight
// through the API server (not a cache: a patch tests what was read), with
// mgr's scheme, and mgr's logger (to name after the API's component). On the leader, once Gate opened
// and the server serves, it registers the APIService with the
// certificate's CA bundle (retrying every Retry) and makes the APIService
// a target of the Manager's injection, so a rotated CA reaches it. Call it
// before mgr starts; it fails on missing options.
func Setup(mgr ctrl.Manager, o SetupOptions, newAPI func(c client.Client, log logr.Logger) API) error {
	if o.Certs == nil || o.FieldOwner == "" || o.BindAddress == "" || o.Service.Name == "" || o.Service.Namespace == "" || o.ServicePort == 0 {
		return errors.New("aggregated: SetupOptions.Certs, FieldOwner, BindAddress, Service and ServicePort are required")
	}
	if o.Retry <= 0 {
		o.Retry = 5 * time.Second
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	api := newAPI(c, mgr.GetLogger())
	log := mgr.GetLogger().WithName(api.Component)
	o.Certs.AddTargets(webhook.Target{Kind: webhook.APIService, Name: api.APIServiceName()})
	serving := make(chan struct{})
	if err := mgr.Add(webhook.EveryReplica(func(ctx context.Context) error {
		select {
		case <-o.Certs.Ready():
		case <-ctx.Done():
			return nil
		}
		l, err := net.Listen("tcp", o.BindAddress)
		if err != nil {
			return fmt.Errorf("%s: listening on %s: %w", api.Component, o.BindAddress, err)
		}
		srv, err := New(Options{Listener: l, Cert: o.Certs, Kubeconfig: o.Kubeconfig}, api)
		if err != nil {
			return err
		}
		go func() {
			select {
			case <-srv.Serving():
				log.Info("serving "+api.GroupVersion.String(), "address", l.Addr().String())
				close(serving)
			case <-ctx.Done():
			}
		}()
		return srv.Run(ctx)
	})); err != nil {
		return err
	}
	// The APIService registration runs on the leader only (a
	// RunnableFunc needs leader election).
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if o.Gate != nil {
			if err := o.Gate(ctx); err != nil {
				return nil // ctx ended
			}
		}
		select {
		case <-serving:
		case <-ctx.Done():
			return nil
		}
		for {
			err := Register(ctx, c, api, o.Service, o.ServicePort, o.Certs.CABundle(), o.FieldOwner)
			if err == nil {
				break
			}
			log.Error(err, "registering the APIService; retrying", "after", o.Retry)
			select {
			case <-time.After(o.Retry):
			case <-ctx.Done():
				return nil
			}
		}
		o.Certs.Trigger()
		log.Info("APIService registered", "name", api.APIServiceName(), "service", o.Service.String(), "port", o.ServicePort)
		return nil
	}))
}
