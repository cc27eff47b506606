package macpool_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/network/macpool"
)

// TestSetupLifecycle runs the pool as converge-controller does
// (macpool.Setup in a manager, its webhook through a Registrar): it waits
// for the NetworkAddonsConfig, then serves MACs from its kubeMacPool
// range, and ends the manager with ErrRangeChanged once that range moves,
// so that the restarted controller rebuilds the pool on the new range.
func TestSetupLifecycle(t *testing.T) {
	cl := startCluster(t)
	crdtest.Install(t, cl.c, "networkaddonsconfigs")
	ctx := context.Background()

	port := controlplane.FreePort(t)
	logs := &safebuffer.Buffer{}
	mgr, err := ctrl.NewManager(cl.env.Config, ctrl.Options{Scheme: cl.scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Logger:  zap.New(zap.WriteTo(logs)),
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = cl.certs.GetCertificate }}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ro := webhook.DefaultRegisterOptions()
	ro.FieldOwner, ro.CRDPoll, ro.Retry = "converge-test", 100*time.Millisecond, 200*time.Millisecond
	reg, err := webhook.NewRegistrar(mgr, webhook.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}, cl.certs, ro)
	if err != nil {
		t.Fatal(err)
	}
	o := macpool.DefaultSetupOptions()
	o.Pool.ConfigMap.Namespace, o.Pool.ConfigMap.Name = poolNS, "lifecycle-pool"
	o.RangeCheck, o.Poll = 200*time.Millisecond, 100*time.Millisecond
	if err := macpool.Setup(mgr, reg, o); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		// before the server is gone: failurePolicy Fail
		mwc := &unstructured.Unstructured{}
		mwc.SetAPIVersion("admissionregistration.k8s.io/v1")
		mwc.SetKind("MutatingWebhookConfiguration")
		mwc.SetName(macpool.ConfigurationName)
		_ = cl.c.Delete(context.Background(), mwc)
	})

	// No NetworkAddonsConfig yet: the pool waits, nothing is registered.
	time.Sleep(time.Second)
	if strings.Contains(logs.String(), "registered") {
		t.Fatalf("the MAC pool webhook was registered before a NetworkAddonsConfig existed:\n%s", logs.String())
	}

	nac := &unstructured.Unstructured{}
	nac.SetGroupVersionKind(macpool.NetworkAddonsConfigGVK)
	nac.SetName(macpool.NetworkAddonsConfigName)
	_ = unstructured.SetNestedField(nac.Object, map[string]any{"rangeStart": "02:aa:00:00:00:00", "rangeEnd": "02:aa:00:00:00:ff"}, "spec", "kubeMacPool")
	if err := cl.c.Create(ctx, nac); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		vm := newVM("default", "lifecycle", nic("default", ""))
		if err := cl.c.Create(ctx, vm, client.DryRunAll); err != nil {
			return false
		}
		return strings.HasPrefix(macsOf(t, vm)[0], "02:aa:00:00:00:")
	})

	if err := cl.c.Get(ctx, client.ObjectKeyFromObject(nac), nac); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(nac.Object, "02:bb:00:00:00:00", "spec", "kubeMacPool", "rangeStart")
	_ = unstructured.SetNestedField(nac.Object, "02:bb:00:00:00:ff", "spec", "kubeMacPool", "rangeEnd")
	if err := cl.c.Update(ctx, nac); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, macpool.ErrRangeChanged) {
			t.Fatalf("the manager ended with %v, want ErrRangeChanged", err)
		}
		if !strings.Contains(err.Error(), "02:aa:00:00:00:00") || !strings.Contains(err.Error(), "02:bb:00:00:00:00") {
			t.Errorf("error %q does not name the old and the new range", err)
		}
		done <- err // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatalf("the manager still runs 30s after the range changed:\n%s", logs.String())
	}
}
