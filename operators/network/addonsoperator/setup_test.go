package addonsoperator_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/network/addonsoperator"
	"github.com/converge-dev/converge/operators/network/macpool"
	"github.com/converge-dev/converge/operators/operand"
)

const opNS = "converge-system"

// TestNetworkOperator runs the network operator with the MAC pool on a
// real API server: no pool before a NetworkAddonsConfig exists; a native
// one with linuxBridge and kubeMacPool gets bridge-marker in the
// operator's namespace, CNAO's status fields, and the MAC pool handing out
// MACs from its range; dropping kubeMacPool removes the pool's webhook
// configuration and ends the manager with ErrRoleGone.
func TestNetworkOperator(t *testing.T) {
	controlplane.RequireForTest(t)
	env, c, scheme := controlplane.StartEnvForTest(t)
	crdtest.Install(t, c, "networkaddonsconfigs", "virtualmachines")
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opNS}}); err != nil {
		t.Fatal(err)
	}
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret: types.NamespacedName{Namespace: opNS, Name: "converge-webhook-cert"}, Hosts: []string{"127.0.0.1"},
		Targets: macpool.Webhook(nil).Targets(), Resync: time.Second,
	})
	port := controlplane.FreePort(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}})})
	if err != nil {
		t.Fatal(err)
	}
	ro := webhook.DefaultRegisterOptions()
	ro.FieldOwner, ro.CRDPoll, ro.Retry = "converge-test", 100*time.Millisecond, 200*time.Millisecond
	reg, err := webhook.NewRegistrar(mgr, webhook.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}, certs, ro)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	oo := operand.DefaultOptions()
	oo.Images = map[string]string{"node": "registry.local/converge-node:v-test"}
	oo.Namespace, oo.Version, oo.Poll, oo.SkipNameValidation = opNS, "v-test", 200*time.Millisecond, true
	mp := macpool.DefaultSetupOptions()
	mp.Pool.ConfigMap.Namespace = opNS
	mp.Poll, mp.RangeCheck = 100*time.Millisecond, time.Hour
	if err := addonsoperator.Setup(mgr, engine, addonsoperator.Options{Operand: oo, MACPool: &mp, Webhooks: reg}); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = c.Delete(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: macpool.ConfigurationName}})
	})

	time.Sleep(time.Second)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: macpool.ConfigurationName}, mwc); !apierrors.IsNotFound(err) {
		t.Errorf("the MAC pool is registered before any NetworkAddonsConfig: %v", err)
	}

	nac := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networkaddonsoperator.network.kubevirt.io/v1", "kind": "NetworkAddonsConfig",
		"metadata": map[string]any{"name": "cluster", "annotations": map[string]any{"converge.dev/operator": "native"}},
		"spec": map[string]any{"linuxBridge": map[string]any{}, "multus": map[string]any{},
			"kubeMacPool": map[string]any{"rangeStart": "02:cc:00:00:00:00", "rangeEnd": "02:cc:00:00:00:ff"}},
	}}
	if err := c.Create(ctx, nac); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	controlplane.Eventually(t, time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: "converge-bridge-marker"}, ds) == nil
	})
	if got := ds.Spec.Template.Spec.InitContainers[0].Image; got != "registry.local/converge-node:v-test" {
		t.Errorf("cni-install image %s", got)
	}
	controlplane.Eventually(t, time.Minute, func() bool {
		if c.Get(ctx, client.ObjectKeyFromObject(nac), nac) != nil {
			return false
		}
		st, _, _ := unstructured.NestedMap(nac.Object, "status")
		_, phase := st["phase"]
		return st["operatorVersion"] == "v-test" && st["targetVersion"] == "v-test" && !phase && st["conditions"] != nil
	})
	start := time.Now()
	controlplane.Eventually(t, time.Minute, func() bool {
		vm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
			"metadata": map[string]any{"namespace": "default", "name": "web"},
			"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{
				"domain":   map[string]any{"devices": map[string]any{"interfaces": []any{map[string]any{"name": "default", "bridge": map[string]any{}}}}},
				"networks": []any{map[string]any{"name": "default", "pod": map[string]any{}}}}}},
		}}
		if c.Create(ctx, vm, client.DryRunAll) != nil {
			return false
		}
		nics, _, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "domain", "devices", "interfaces")
		mac, _ := nics[0].(map[string]any)["macAddress"].(string)
		return strings.HasPrefix(mac, "02:cc:00:00:00:")
	})
	t.Logf("the MAC pool handed out a MAC of the NetworkAddonsConfig's range %s after bridge-marker was applied", time.Since(start).Round(time.Millisecond))

	// kubeMacPool dropped: CNAO would remove kubemacpool; converge removes
	// the pool's webhook and restarts without the pool.
	if err := c.Patch(ctx, nac, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"kubeMacPool":null}}`))); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, operand.ErrRoleGone) || !strings.Contains(err.Error(), addonsoperator.RoleMACPool) {
			t.Errorf("manager ended with %v, want ErrRoleGone naming %s", err, addonsoperator.RoleMACPool)
		}
		done <- err
	case <-time.After(time.Minute):
		t.Fatal("the manager still runs a minute after kubeMacPool was dropped")
	}
	if err := c.Get(ctx, client.ObjectKey{Name: macpool.ConfigurationName}, mwc); !apierrors.IsNotFound(err) {
		t.Errorf("the MAC pool's webhook configuration is left: %v", err)
	}
}
