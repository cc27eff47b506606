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

	"github.com/rogpeppe/go-internal/testscript"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/virtapitest"
)

// vmCluster is a real API server with KubeVirt's VM CRDs (as the graph's
// virt component installs them), converge-controller's virt-api registered
// as the aggregated API subresources.kubevirt.io (in-process,
// internal/testing/virtapitest), which the vm verbs call, and an admin
// kubeconfig (a client certificate).
type vmCluster struct {
	c          client.Client
	kubeconfig string
	env        *controlplane.Env
}

func newVMCluster(t *testing.T) *vmCluster {
	t.Helper()
	env, c, _ := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances")
	virtapitest.Start(t, env)
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
