package graph_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// docsVM is a VirtualMachine in the style of KubeVirt's user guide
// (virtual_machines/virtual_machine_instances, interfaces_and_networks,
// startup_scripts): Quantities, CPU topology, disks, a bridge interface on
// a multus network, tolerations, a nodeSelector and cloud-init NoCloud.
const docsVM = `
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: docs-vm
  namespace: default
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        kubevirt.io/vm: docs-vm
    spec:
      domain:
        cpu:
          cores: 2
          sockets: 1
          threads: 1
        memory:
          guest: 128Mi
        resources:
          requests:
            memory: 128Mi
            cpu: 100m
          limits:
            memory: 1Gi
        devices:
          disks:
          - name: containerdisk
            disk:
              bus: virtio
          - name: cloudinitdisk
            disk:
              bus: virtio
          interfaces:
          - name: default
            masquerade: {}
          - name: br
            bridge: {}
            macAddress: "02:00:00:00:00:01"
        machine:
          type: q35
      networks:
      - name: default
        pod: {}
      - name: br
        multus:
          networkName: bridge-net
      nodeSelector:
        kubernetes.io/os: linux
      tolerations:
      - key: node-role.kubernetes.io/control-plane
        operator: Exists
        effect: NoSchedule
      - key: dedicated
        operator: Equal
        value: vms
        effect: NoExecute
        tolerationSeconds: 300
      terminationGracePeriodSeconds: 30
      volumes:
      - name: containerdisk
        containerDisk:
          image: quay.io/kubevirt/cirros-container-disk-demo
      - name: cloudinitdisk
        cloudInitNoCloud:
          userData: |
            #cloud-config
            password: fedora
            chpasswd: { expire: False }
`

// TestVMCRDsOnAPIServer installs the engine's VirtualMachine and
// VirtualMachineInstance CRDs on a real API server and checks that they
// behave as upstream KubeVirt's: a documented manifest round-trips
// unchanged, wrong types are refused with the field path, and unknown
// fields are pruned.
func TestVMCRDsOnAPIServer(t *testing.T) {
	c := controlplane.StartForTest(t)
	ctx := context.Background()
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	crds, err := e.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generating every CRD took %v", time.Since(start))
	installed := 0
	for _, crd := range crds {
		if crd.Name != "virtualmachines" && crd.Name != "virtualmachineinstances" {
			continue
		}
		b, err := json.Marshal(crd.Object.Object)
		if err != nil {
			t.Fatal(err)
		}
		// etcd's default request limit is 1.5 MiB; keep well below.
		t.Logf("CRD %s: %d bytes of JSON", crd.Name, len(b))
		if len(b) > 1<<20 {
			t.Errorf("CRD %s is %d bytes, want under 1 MiB to fit etcd", crd.Name, len(b))
		}
		if err := c.Patch(ctx, crd.Object, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatalf("installing CRD %s: %v", crd.Name, err)
		}
		installed++
	}
	if installed != 2 {
		t.Fatalf("the engine generated %d of the 2 VM CRDs", installed)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("kubevirt.io/v1")
		l.SetKind("VirtualMachineList")
		return c.List(ctx, l) == nil
	})

	tests := []struct {
		name string
		// edit changes the docs VM before it is created.
		edit func(u *unstructured.Unstructured)
		// wantErr is a substring of the refusal; "" means accepted.
		wantErr string
		// check inspects the object read back.
		check func(t *testing.T, sent, got *unstructured.Unstructured)
	}{{
		name: "docs manifest round-trips unchanged",
		check: func(t *testing.T, sent, got *unstructured.Unstructured) {
			want, _ := yaml.Marshal(sent.Object["spec"])
			have, _ := yaml.Marshal(got.Object["spec"])
			if string(want) != string(have) {
				t.Errorf("spec changed on the server:\n got %s\nwant %s", have, want)
			}
		},
	}, {
		name: "cores as a string is refused",
		edit: func(u *unstructured.Unstructured) {
			set(t, u, "two", "spec", "template", "spec", "domain", "cpu", "cores")
		},
		wantErr: "spec.template.spec.domain.cpu.cores",
	}, {
		name: "memory that is no quantity is refused",
		edit: func(u *unstructured.Unstructured) {
			set(t, u, true, "spec", "template", "spec", "domain", "memory", "guest")
		},
		wantErr: "spec.template.spec.domain.memory.guest",
	}, {
		name: "interfaces as an object is refused",
		edit: func(u *unstructured.Unstructured) {
			set(t, u, map[string]any{"name": "default"}, "spec", "template", "spec", "domain", "devices", "interfaces")
		},
		wantErr: "spec.template.spec.domain.devices.interfaces",
	}, {
		name: "unknown runStrategy is refused",
		edit: func(u *unstructured.Unstructured) {
			set(t, u, "Sometimes", "spec", "runStrategy")
		},
		wantErr: "spec.runStrategy",
	}, {
		name: "VM without a template is refused",
		edit: func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "template")
		},
		wantErr: "spec.template",
	}, {
		name: "unknown field in the domain is pruned, as upstream",
		edit: func(u *unstructured.Unstructured) {
			set(t, u, "yes", "spec", "template", "spec", "domain", "turbo")
			set(t, u, int64(3), "spec", "template", "spec", "domain", "cpu", "warp")
		},
		check: func(t *testing.T, sent, got *unstructured.Unstructured) {
			for _, p := range [][]string{
				{"spec", "template", "spec", "domain", "turbo"},
				{"spec", "template", "spec", "domain", "cpu", "warp"},
			} {
				if _, ok, _ := unstructured.NestedFieldNoCopy(got.Object, p...); ok {
					t.Errorf("%s kept, want it pruned", strings.Join(p, "."))
				}
			}
			if cores, _, _ := unstructured.NestedInt64(got.Object, "spec", "template", "spec", "domain", "cpu", "cores"); cores != 2 {
				t.Errorf("cpu.cores = %d after pruning its sibling, want 2", cores)
			}
		},
	}, {
		name: "integer quantity is accepted",
		edit: func(u *unstructured.Unstructured) {
			set(t, u, int64(134217728), "spec", "template", "spec", "domain", "memory", "guest")
		},
		check: func(t *testing.T, _, got *unstructured.Unstructured) {
			if g, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "template", "spec", "domain", "memory", "guest"); g != int64(134217728) {
				t.Errorf("memory.guest = %#v, want 134217728", g)
			}
		},
	}}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(docsVM), &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetName("docs-vm-" + string(rune('a'+i)))
			if tc.edit != nil {
				tc.edit(u)
			}
			sent := u.DeepCopy()
			err := c.Create(ctx, u)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("create: err = %v, want one naming %s", err, tc.wantErr)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			if err := c.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, got); err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, sent, got)
			}
		})
	}
}

// set sets a nested field of u or fails the test.
func set(t *testing.T, u *unstructured.Unstructured, v any, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(u.Object, v, path...); err != nil {
		t.Fatal(err)
	}
}
