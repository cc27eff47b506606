package vmadmission_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/internal/controlplane"
	"github.com/converge-dev/converge/vmadmission"
	"github.com/converge-dev/converge/webhookcert"
)

// installCRD creates a kubevirt.io/v1 CRD that keeps every field (the
// virt component installs the real one) and waits until it is served.
func installCRD(t *testing.T, ctx context.Context, c client.Client, plural, kind string) {
	t.Helper()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".kubevirt.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kubevirt.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("kubevirt.io/v1")
		l.SetKind(kind + "List")
		return c.List(ctx, l) == nil
	})
}

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
// (serving certificate and caBundle from webhookcert) and checks what the
// API server then admits and refuses.
func TestThroughAPIServer(t *testing.T) {
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") != "" {
			t.Fatal("kube-apiserver and etcd are not in bin/: run `make controlplane`")
		}
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	env, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	installCRD(t, ctx, c, "virtualmachines", "VirtualMachine")
	installCRD(t, ctx, c, "virtualmachineinstances", "VirtualMachineInstance")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "converge-system"}}); err != nil {
		t.Fatal(err)
	}
	// stored before the webhook existed: it must stay manageable
	old := object(t, vmJSON("old", gpuSpec))
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}

	certs, err := webhookcert.New(c, webhookcert.Options{
		Secret:  types.NamespacedName{Namespace: "converge-system", Name: "converge-webhook-cert"},
		Hosts:   []string{"127.0.0.1"},
		Targets: []webhookcert.Target{{Kind: webhookcert.ValidatingWebhook, Name: vmadmission.ConfigurationName}},
		Resync:  time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = certs.Start(ctx) }()
	select {
	case <-certs.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("no serving certificate")
	}
	port := controlplane.FreePort(t)
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}})
	vmadmission.Register(srv)
	go func() { _ = srv.Start(ctx) }()
	ep := vmadmission.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port)}
	if err := vmadmission.Apply(ctx, c, ep, nil, "converge-test"); err != nil {
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
