package virtoperator_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/virt/virtcontroller"
	"github.com/converge-dev/converge/operators/virt/virtoperator"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

const kvNS = "kubevirt-hyperconverged"

// TestVirtOperator runs the virt operator with its roles on a real API
// server: until a native KubeVirt exists, virt-controller makes no VMI of
// a VirtualMachine and the VM validation webhook is not registered; once
// one exists, both run, the webhook refuses the CPU models the KubeVirt's
// obsoleteCPUModels names, the VM agent's DaemonSet serves the native
// HostPathProvisioner's storage pool (the operator's inputs), and the CR
// reports KubeVirt's status fields;
// when it is deleted, the webhook configuration goes and the manager ends
// with ErrRoleGone naming the role.
func TestVirtOperator(t *testing.T) {
	controlplane.RequireForTest(t)
	env, c, scheme := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme, cdiv1.AddToScheme)
	crdtest.Install(t, c, "kubevirts", "virtualmachines", "virtualmachineinstances", "datavolumes", "hostpathprovisioners", "virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences")
	ctx := context.Background()
	for _, ns := range []string{kvNS, "vms"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret: types.NamespacedName{Namespace: kvNS, Name: "converge-webhook-cert"}, Hosts: []string{"127.0.0.1"},
		Targets: vmadmission.Webhook(vmadmission.Options{}).Targets(), Resync: time.Second,
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
	oo.Images = map[string]string{"node": "registry.local/converge/converge-node:v-test"}
	oo.Version, oo.Poll, oo.SkipNameValidation = "v-test", 200*time.Millisecond, true
	vc := virtcontroller.DefaultOptions()
	vc.CRDPoll, vc.SkipNameValidation = 100*time.Millisecond, true
	if err := virtoperator.Setup(mgr, engine, virtoperator.Options{Operand: oo, VirtController: &vc, VMValidation: true, Webhooks: reg}); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = c.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: vmadmission.ConfigurationName}})
	})

	// No KubeVirt: the roles wait.
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: vmiSpec("")}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "vms", Name: "web"}, vmi); !apierrors.IsNotFound(err) {
		t.Errorf("a VMI of the VM exists before any KubeVirt: %v", err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: vmadmission.ConfigurationName}, vwc); !apierrors.IsNotFound(err) {
		t.Errorf("the VM validation webhook is registered before any KubeVirt: %v", err)
	}

	// A native HostPathProvisioner: its pool is the VM agent's.
	hpp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hostpathprovisioner.kubevirt.io/v1beta1", "kind": "HostPathProvisioner",
		"metadata": map[string]any{"name": "hostpath-provisioner", "annotations": map[string]any{"converge.dev/operator": "native"}},
		"spec":     map[string]any{"storagePools": []any{map[string]any{"name": "local", "path": "/var/hpvolumes"}}},
	}}
	if err := c.Create(ctx, hpp); err != nil {
		t.Fatal(err)
	}

	// A native KubeVirt: the roles start.
	kv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt-kubevirt-hyperconverged", "namespace": kvNS, "annotations": map[string]any{"converge.dev/operator": "native"}},
		"spec":     map[string]any{"configuration": map[string]any{"obsoleteCPUModels": map[string]any{"qemu64": true}}},
	}}
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	controlplane.Eventually(t, time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "vms", Name: "web"}, vmi) == nil
	})
	t.Logf("virt-controller made the VM's VMI %s after the KubeVirt was created", time.Since(start).Round(time.Millisecond))
	var denied error
	controlplane.Eventually(t, time.Minute, func() bool {
		old := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "old"}, Spec: vmiSpec("qemu64")}
		denied = c.Create(ctx, old, client.DryRunAll)
		return denied != nil && strings.Contains(denied.Error(), `spec.domain.cpu.model: CPU model "qemu64" is obsolete`)
	})
	current := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "current"}, Spec: vmiSpec("Skylake-Server")}
	if err := c.Create(ctx, current, client.DryRunAll); err != nil {
		t.Errorf("a VMI with a current CPU model: %v", err)
	}
	controlplane.Eventually(t, time.Minute, func() bool {
		if c.Get(ctx, client.ObjectKeyFromObject(kv), kv) != nil {
			return false
		}
		st, _, _ := unstructured.NestedMap(kv.Object, "status")
		return st["phase"] == "Deploying" && st["operatorVersion"] == "v-test" && st["targetKubeVirtVersion"] == "v-test" &&
			st["targetKubeVirtRegistry"] == "registry.local/converge"
	})

	controlplane.Eventually(t, time.Minute, func() bool {
		ds := &appsv1.DaemonSet{}
		if c.Get(ctx, client.ObjectKey{Namespace: kvNS, Name: "converge-vm-agent"}, ds) != nil {
			return false
		}
		for _, ct := range ds.Spec.Template.Spec.Containers {
			if ct.Name == "vm-agent" && slices.Contains(ct.Args, "--storage-pool=local=/var/hpvolumes") {
				return true
			}
		}
		return false
	})

	// The last KubeVirt gone: the webhook configuration goes, the manager
	// ends so that the process restarts without the roles.
	if err := c.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, operand.ErrRoleGone) {
			t.Errorf("manager ended with %v, want ErrRoleGone", err)
		}
		done <- err // for the cleanup
	case <-time.After(time.Minute):
		t.Fatal("the manager still runs a minute after the last KubeVirt was deleted")
	}
	if err := c.Get(ctx, client.ObjectKey{Name: vmadmission.ConfigurationName}, vwc); !apierrors.IsNotFound(err) {
		t.Errorf("the VM validation webhook configuration is left: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// vmiSpec is a VMI spec converge runs, with CPU model model ("" for none).
func vmiSpec(model string) kubevirtv1.VirtualMachineInstanceSpec {
	s := kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
		Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: *resourceQuantity("64Mi")}},
	}}
	if model != "" {
		s.Domain.CPU = &kubevirtv1.CPU{Model: model}
	}
	return s
}

func resourceQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
