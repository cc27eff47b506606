package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/internal/controlplane"
)

// vmCluster is a real API server with KubeVirt's VM CRDs (as the graph's
// virt component installs them) and an admin kubeconfig.
type vmCluster struct {
	c          client.Client
	kubeconfig string
	env        *controlplane.Env
}

func newVMCluster(t *testing.T) *vmCluster {
	t.Helper()
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) {
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	env, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kubevirtv1.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := engine.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if crd.Name == "virtualmachines" || crd.Name == "virtualmachineinstances" {
			if err := c.Patch(t.Context(), crd.Object, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
				t.Fatalf("CRD %s: %v", crd.Name, err)
			}
		}
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return c.List(t.Context(), &kubevirtv1.VirtualMachineList{}) == nil && c.List(t.Context(), &kubevirtv1.VirtualMachineInstanceList{}) == nil
	})
	return &vmCluster{c: c, kubeconfig: kubeconfig, env: env}
}

// apply creates the objects of a YAML stream, then writes the status
// they carry through the status subresource, as a controller or the
// node agent would.
func (v *vmCluster) apply(ctx context.Context, r io.Reader) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		status, hasStatus := u.Object["status"]
		if err := v.c.Create(ctx, u); err != nil {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if hasStatus {
			u.Object["status"] = status
			if err := v.c.Status().Update(ctx, u); err != nil {
				return fmt.Errorf("%s %s status: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// vmState prints what the lifecycle verbs write: spec.runStrategy (or
// spec.running) and status.stateChangeRequests, a Stop's uid shown as
// "vmi" when it is the current VMI's.
func (v *vmCluster) vmState(ctx context.Context, ns, name string) (string, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := v.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		return "", err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := v.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); client.IgnoreNotFound(err) != nil {
		return "", err
	}
	var b strings.Builder
	switch {
	case vm.Spec.RunStrategy != nil:
		fmt.Fprintf(&b, "runStrategy: %s\n", *vm.Spec.RunStrategy)
	case vm.Spec.Running != nil: //nolint:staticcheck // the legacy field
		fmt.Fprintf(&b, "running: %t\n", *vm.Spec.Running) //nolint:staticcheck
	}
	var reqs []string
	for _, r := range vm.Status.StateChangeRequests {
		s := string(r.Action)
		if r.UID != nil {
			uid := string(*r.UID)
			if uid == string(vmi.UID) {
				uid = "vmi"
			}
			s += "(" + uid + ")"
		}
		reqs = append(reqs, s)
	}
	fmt.Fprintf(&b, "stateChangeRequests: [%s]\n", strings.Join(reqs, " "))
	return b.String(), nil
}

// TestVMScripts runs testdata/script/vm/*.txtar against one real API
// server with the VM CRDs; $KUBECONFIG is its admin. Each script works in
// its own namespace. Commands beyond testscript's:
//
//	kube-apply FILE       create the objects of FILE (then their status)
//	vm-state NS NAME      print the VM's run strategy and state-change requests
func TestVMScripts(t *testing.T) {
	v := newVMCluster(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:           filepath.Join(root, "testdata", "script", "vm"),
		UpdateScripts: os.Getenv("UPDATE_GOLDEN") != "",
		Setup: func(env *testscript.Env) error {
			env.Setenv("KUBECONFIG", v.kubeconfig)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"kube-apply": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: kube-apply FILE")
				}
				err := v.apply(context.Background(), bytes.NewReader([]byte(ts.ReadFile(args[0]))))
				if (err != nil) != neg {
					ts.Fatalf("kube-apply %s: %v", args[0], err)
				}
			},
			"vm-state": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 {
					ts.Fatalf("usage: vm-state NS NAME")
				}
				s, err := v.vmState(context.Background(), args[0], args[1])
				if err != nil {
					ts.Fatalf("vm-state: %v", err)
				}
				_, _ = ts.Stdout().Write([]byte(s))
			},
		},
	})
}
