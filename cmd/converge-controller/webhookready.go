package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// webhookReachable gives a gate that returns once the Service svc has a
// ready endpoint, as its EndpointSlices (label kubernetes.io/service-name)
// read through r every interval say; the API server can call the webhooks
// served behind svc from then on. Once it returned nil it returns nil at
// once. It ends with ctx's error when ctx ends first.
//
// The Sync controller waits on it (synccontroller.Reconciler.Gate): its
// applies of HyperConvergeds go through the hco-webhook this same process
// serves, which has no endpoint until the pod is Ready; without the gate
// the first reconciles after a start fail with "no endpoints available
// for service".
func webhookReachable(r client.Reader, svc types.NamespacedName, interval time.Duration) func(ctx context.Context) error {
	var reached atomic.Bool
	return func(ctx context.Context) error {
		var last error
		for !reached.Load() {
			ok, err := hasReadyEndpoint(ctx, r, svc)
			last = err
			switch {
			case err != nil:
				// Read again at the next tick: a failed read (the API
				// server busy, the client's rate limiter refusing a wait
				// past ctx's deadline) is no answer either way.
			case ok:
				reached.Store(true)
				continue
			}
			select {
			case <-ctx.Done():
				if last != nil {
					return fmt.Errorf("Service %s: no ready endpoint yet (last read of its EndpointSlices: %v): %w", svc, last, ctx.Err())
				}
				return fmt.Errorf("Service %s: no ready endpoint yet: %w", svc, ctx.Err())
			case <-time.After(interval):
			}
		}
		return nil
	}
}

// hasReadyEndpoint reports whether an EndpointSlice of svc lists an
// endpoint whose ready condition is true (or unset, which means ready).
func hasReadyEndpoint(ctx context.Context, r client.Reader, svc types.NamespacedName) (bool, error) {
	var slices discoveryv1.EndpointSliceList
	if err := r.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		return false, err
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				return true, nil
			}
		}
	}
	return false, nil
}
