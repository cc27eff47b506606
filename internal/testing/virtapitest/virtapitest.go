// Package virtapitest runs converge-controller's virt-api
// (operators/virt/virtapi) in-process for tests, registered with a test
// control plane as converge-controller registers it (aggregatedtest).
package virtapitest

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/aggregated"
	"github.com/converge-dev/converge/internal/testing/aggregatedtest"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/virt/virtapi"
)

// Namespace and ServiceName are aggregatedtest's: where the server's
// Service, certificate Secret and ServiceAccount are.
const (
	Namespace   = aggregatedtest.Namespace
	ServiceName = aggregatedtest.ServiceName
)

// Start runs the virt-api against env until t ends and waits until the
// API server reports the APIService Available (aggregatedtest.Start). The
// server reads and patches as the control plane's admin and authenticates
// to node console servers with the token of converge-controller's
// ServiceAccount. It skips t as controlplane.StartEnvForTest does.
func Start(t testing.TB, env *controlplane.Env) {
	t.Helper()
	aggregatedtest.Start(t, env, func(c client.Client, token string) aggregated.API {
		return virtapi.API(virtapi.Options{Client: c, ConsoleToken: func(context.Context) (string, error) { return token, nil }})
	})
}

// WaitAvailable waits until the APIService v1.subresources.kubevirt.io is
// Available, failing t after 60s with its last condition.
func WaitAvailable(t testing.TB, c client.Client) {
	t.Helper()
	aggregatedtest.WaitAvailable(t, c, virtapi.APIServiceName)
}
