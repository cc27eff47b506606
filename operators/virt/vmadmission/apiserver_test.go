package vmadmission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// object decodes one of the JSON documents of check_test.go.
func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestThroughAPIServer registers the webhook with a real kube-apiserver
// (serving certificate and caBundle from internal/webhook's Manager) and
// checks what the API server then admits and refuses.
func TestThroughAPIServer(t *testing.T) {
	controlplane.RequireForTest(t)
	_, c, _ := controlplane.StartEnvForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// CRDs that keep every field (the virt component installs the real ones)
	crdtest.InstallPermissive(t, c, "virtualmachines", "VirtualMachine")
	crdtest.InstallPermissive(t, c, "virtualmachineinstances", "VirtualMachineInstance")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "converge-system"}}); err != nil {
		t.Fatal(err)
	}
	// stored before the webhook existed: it must stay manageable
	old := object(t, vmJSON("old", gpuSpec))
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}

	w := vmadmission.Webhook(vmadmission.Options{})
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret:  types.NamespacedName{Namespace: "converge-system", Name: "converge-webhook-cert"},
		Hosts:   []string{"127.0.0.1"},
		Targets: w.Targets(),
		Resync:  time.Second,
	})
	ep := webhooktest.Serve(t, ctx, certs, w)
	if err := w.Apply(ctx, c, ep, nil, "converge-test"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	controlplane.Eventually(t, 30*time.Second, func() bool { // caBundle injected, configuration picked up
		err := c.Create(ctx, object(t, vmJSON("probe", gpuSpec)), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "denied the request")
	})
	t.Logf("webhook called by the API server %s after Apply", time.Since(start).Round(time.Millisecond))

	denied := func(name string) string {
		return fmt.Sprintf("admission webhook %q denied the request: ", name)
	}
	vmHook, vmiHook := denied(vmadmission.VirtualMachineWebhookName), denied(vmadmission.VirtualMachineInstanceWebhookName)
	for _, c2 := range []struct {
		name string
		do   func() error
		want []string // substrings of the error; nil: admitted
	}{
		{"supported VM admitted", func() error { return c.Create(ctx, object(t, vmJSON("web", okSpec))) }, nil},
		{"rejected fields refused naming each path", func() error { return c.Create(ctx, object(t, vmJSON("gpu", gpuSpec))) }, []string{
			vmHook + "VirtualMachine default/gpu: spec.template.spec.domain.devices.disks[0].lun: not supported by converge (no SCSI passthrough)",
			"VirtualMachine default/gpu: spec.template.spec.domain.devices.gpus: not supported by converge"}},
		{"unknown field refused", func() error { return c.Create(ctx, object(t, vmJSON("typo", typo))) }, []string{
			vmHook + "VirtualMachine default/typo: spec.template.spec.domain.devices.gpu: " + vmadmission.UnknownFieldReason}},
		{"supported VMI admitted", func() error { return c.Create(ctx, object(t, vmiJSON("vmi-ok", okSpec))) }, nil},
		{"rejected VMI refused", func() error { return c.Create(ctx, object(t, vmiJSON("vmi-gpu", gpuSpec))) }, []string{
			vmiHook + "VirtualMachineInstance default/vmi-gpu: spec.domain.devices.disks[0].lun"}},
		{"status-only update of an existing VM not re-checked", func() error {
			u := object(t, vmJSON("old", gpuSpec))
			u.Object["status"] = map[string]any{"printableStatus": "Stopped"}
			return c.Status().Patch(ctx, u, client.Merge)
		}, nil},
		{"metadata update of an existing VM not re-checked", func() error {
			return c.Patch(ctx, object(t, vmJSON("old", gpuSpec)), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}},"spec":{"runStrategy":"Always"}}`)))
		}, nil},
		{"spec update of an existing VM re-checked", func() error {
			return c.Patch(ctx, object(t, vmJSON("old", gpuSpec)), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"spec":{"hostname":"x"}}}}`)))
		}, []string{vmHook + "VirtualMachine default/old: spec.template.spec.domain.devices.disks[0].lun"}},
	} {
		t.Run(c2.name, func(t *testing.T) {
			err := c2.do()
			if c2.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("admitted, want it refused")
			}
			for _, w := range c2.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}
