package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/safebuffer"
)

const vmiFile = `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm1
  namespace: ns
spec:
  domain:
    memory:
      guest: 64Mi
    devices:
      interfaces:
        - name: default
          bridge: {}
  networks:
    - name: default
      pod: {}
---
# refused: a GPU
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm2
  namespace: ns
spec:
  domain:
    memory:
      guest: 64Mi
    devices:
      gpus:
        - name: g
          deviceName: nvidia.com/x
`

// TestVMCommandStaticFile runs converge-node vm on libvirt's test driver
// with a VMI file: the supported VMI is reported Running and Ready, the
// refused one Failed; cancelling the context ends the command cleanly.
func TestVMCommandStaticFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "vmis.yaml")
	if err := os.WriteFile(file, []byte(vmiFile), 0o644); err != nil {
		t.Fatal(err)
	}
	node, err := filepath.Abs("../../nodeplane/vm/libvirt/testdata/empty-node.xml")
	if err != nil {
		t.Fatal(err)
	}
	out := &safebuffer.Buffer{}
	root := newRoot()
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs([]string{"vm", "--node-name", "n1", "--libvirt-uri", "test://" + node, "--domain-type", "test",
		"--emulator", "", "--state-dir", dir, "--pod-bridge", "cvbr0", "--vmi-file", file})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	want := []string{"ns/vm1 Running ready=True", "ns/vm2 Failed ready=False Unsupported"}
	guard := time.Now().Add(60 * time.Second) // hang guard only
	for {
		s := out.String()
		all := true
		for _, w := range want {
			all = all && strings.Contains(s, w)
		}
		if all {
			break
		}
		if time.Now().After(guard) {
			t.Fatalf("output after 60s:\n%s", s)
		}
		select {
		case err := <-done:
			t.Fatalf("command ended early: %v\n%s", err, s)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("command: %v", err)
	}
}

func TestVMCommandRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	pod := filepath.Join(dir, "pod.yaml")
	if err := os.WriteFile(pod, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: x\nspec:\n  domian: {cpu: {cores: 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"vm"}, "--vmi-file: at least one file"},
		{[]string{"vm", "--kubeconfig", "/x", "--vmi-file", pod}, "--kubeconfig: the API source is not implemented yet"},
		{[]string{"vm", "--vmi-file", pod}, `pod.yaml: document 1: kind "Pod", expected VirtualMachineInstance`},
		{[]string{"vm", "--vmi-file", typo}, `typo.yaml: document 1: unknown field "spec.domian"`},
		{[]string{"vm", "--vmi-file", filepath.Join(dir, "none.yaml")}, "--vmi-file: open"},
	} {
		root := newRoot()
		root.SetArgs(tc.args)
		root.SetOut(&bytes.Buffer{})
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}
