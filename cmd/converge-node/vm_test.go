package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/kvmprobe"
	"github.com/converge-dev/converge/nodeplane/vm/libvirt"
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
	node, err := libvirt.EmptyTestNode(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := &safebuffer.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, out, "vm", "--node-name", "n1", "--libvirt-uri", node, "--domain-type", "test",
			"--emulator", "", "--state-dir", dir, "--pod-bridge", "cvbr0", "--vmi-file", file)
	}()
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
		{[]string{"vm"}, "--kubeconfig, --in-cluster or --vmi-file: exactly one source"},
		{[]string{"vm", "--kubeconfig", "/x", "--vmi-file", pod}, "--kubeconfig, --in-cluster or --vmi-file: exactly one source"},
		{[]string{"vm", "--in-cluster", "--kubeconfig", "/x"}, "--kubeconfig, --in-cluster or --vmi-file: exactly one source"},
		{[]string{"vm", "--in-cluster", "--libvirt-uri", "test:///default"}, "--in-cluster: unable to load in-cluster configuration"},
		{[]string{"vm", "--kubeconfig", filepath.Join(dir, "none"), "--libvirt-uri", "test:///default", "--reserved-memory", "lots"}, `--reserved-memory "lots": expected a non-negative quantity`},
		{[]string{"vm", "--kubeconfig", filepath.Join(dir, "none"), "--libvirt-uri", "test:///default"}, "--kubeconfig " + filepath.Join(dir, "none")},
		{[]string{"vm", "--vmi-file", pod}, `pod.yaml: document 1: kind "Pod", expected VirtualMachineInstance`},
		{[]string{"vm", "--vmi-file", typo}, `typo.yaml: document 1: unknown field "spec.domian"`},
		{[]string{"vm", "--vmi-file", filepath.Join(dir, "none.yaml")}, "--vmi-file: open"},
	} {
		err := execute(context.Background(), io.Discard, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

// TestVMCommandAPI runs converge-node vm --kubeconfig on libvirt's test
// driver against a real API server with the graph's VM CRDs: it registers
// its Node for the scheduler, runs the VMI bound to it (Running, Ready,
// the agent's finalizer), removes it when it is deleted, and ends cleanly
// when its context is cancelled. A VMI with disks: its
// persistentVolumeClaim is resolved through --storage-pool (the
// PVC resolver is wired): while the claim is Pending the VMI waits
// Scheduled, VolumesNotReady, and runs once the claim is bound to a volume
// of the hostpath driver in that pool, with its cloud-init ISO (user data
// from a Secret, read through the API) and emptyDisk image in the VMI's
// directory, gone once the VMI is deleted; a claim bound to another
// node's volume fails its VMI with a message naming the claim.
func TestVMCommandAPI(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp, c, _ := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	crdtest.Install(t, c, "virtualmachineinstances")

	node, err := libvirt.EmptyTestNode(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pool := hostpathPool(t, "n1", map[string]bool{"vol-data": false, "vol-far": false})
	out := &safebuffer.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, out, "vm", "--node-name", "n1", "--kubeconfig", kubeconfig, "--libvirt-uri", node,
			"--domain-type", "test", "--emulator", "", "--state-dir", dir, "--reserved-memory", "1Mi",
			"--console-bind-address", "127.0.0.1:0", "--storage-pool", pool.Name+"="+pool.Path)
	}()
	alive := func() {
		select {
		case err := <-done:
			t.Fatalf("converge-node vm ended early: %v\n%s", err, out.String())
		default:
		}
	}

	n := &corev1.Node{}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		alive()
		return c.Get(ctx, client.ObjectKey{Name: "n1"}, n) == nil && n.Labels[v1alpha1.AgentLabel] == "true"
	})
	if n.Annotations[v1alpha1.AllocatableAnnotation] == "" {
		t.Errorf("Node n1 has no %s annotation", v1alpha1.AllocatableAnnotation)
	}
	if c := nodeCondition(n, v1alpha1.KVMCondition); c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.KVMReasonDomainTypeSet {
		t.Errorf("Node n1 condition %s = %+v, want False %s (--domain-type test)", v1alpha1.KVMCondition, c, v1alpha1.KVMReasonDomainTypeSet)
	}
	// The console server publishes where it listens and its certificate.
	controlplane.Eventually(t, 30*time.Second, func() bool {
		alive()
		if c.Get(ctx, client.ObjectKey{Name: "n1"}, n) != nil {
			return false
		}
		ep, err := nodeendpoint.Console.FromNode(n)
		return err == nil && strings.HasPrefix(ep.Address, "127.0.0.1:") && ep.Address != "127.0.0.1:0"
	})

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}); err != nil {
		t.Fatal(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1"}}
	q := resource.MustParse("64Mi")
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Status.NodeName, vmi.Status.Phase = "n1", kubevirtv1.Scheduled // as the scheduler binds
	if err := c.Status().Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(vmi)
	controlplane.Eventually(t, 30*time.Second, func() bool {
		alive()
		return c.Get(ctx, key, vmi) == nil && vmi.Status.Phase == kubevirtv1.Running
	})
	if !controllerutil.ContainsFinalizer(vmi, agent.Finalizer) {
		t.Errorf("VMI finalizers %v, want %s", vmi.Finalizers, agent.Finalizer)
	}
	if err := c.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		alive()
		return apierrors.IsNotFound(c.Get(ctx, key, &kubevirtv1.VirtualMachineInstance{}))
	})

	// a VMI with disks
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ud"}, Data: map[string][]byte{"userData": []byte("#cloud-config")}}); err != nil {
		t.Fatal(err)
	}
	claim := createClaim(t, c, "ns", "data")
	withDisks := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm2"}}
	withDisks.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	for _, v := range []kubevirtv1.Volume{
		{Name: "root", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "ud"}}}},
		{Name: "scratch", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("8Mi")}}},
	} {
		withDisks.Spec.Volumes = append(withDisks.Spec.Volumes, v)
		withDisks.Spec.Domain.Devices.Disks = append(withDisks.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: v.Name})
	}
	scheduleVMI(t, c, withDisks, "n1")
	key = client.ObjectKeyFromObject(withDisks)
	controlplane.Eventually(t, 30*time.Second, func() bool {
		alive()
		return c.Get(ctx, key, withDisks) == nil && readyCondition(withDisks).Reason == "VolumesNotReady"
	})
	if cond := readyCondition(withDisks); withDisks.Status.Phase != kubevirtv1.Scheduled || !strings.Contains(cond.Message, `claim "data": PersistentVolumeClaim ns/data: not bound yet (phase Pending)`) {
		t.Errorf("VMI with a Pending claim: phase %s, Ready %s %q", withDisks.Status.Phase, cond.Reason, cond.Message)
	}
	bindClaim(t, c, claim, "vol-data", "n1")
	controlplane.Eventually(t, 30*time.Second, func() bool {
		alive()
		return c.Get(ctx, key, withDisks) == nil && withDisks.Status.Phase == kubevirtv1.Running
	})
	vmiDir := filepath.Join(dir, "vmis", "ns_vm2_"+string(withDisks.UID))
	for _, f := range []string{"ci.iso", "scratch.qcow2"} {
		if _, err := os.Stat(filepath.Join(vmiDir, f)); err != nil {
			t.Errorf("disk of the running VMI: %v", err)
		}
	}
	if err := c.Delete(ctx, withDisks); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		alive()
		return apierrors.IsNotFound(c.Get(ctx, key, &kubevirtv1.VirtualMachineInstance{}))
	})
	if _, err := os.Stat(vmiDir); !os.IsNotExist(err) {
		t.Errorf("%s after the VMI went: %v", vmiDir, err)
	}

	// a claim bound to another node's volume
	bindClaim(t, c, createClaim(t, c, "ns", "far"), "vol-far", "n2")
	far := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm3"}}
	far.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	far.Spec.Volumes = []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "far"}}}}}
	far.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "root"}}
	scheduleVMI(t, c, far, "n1")
	controlplane.Eventually(t, 30*time.Second, func() bool {
		alive()
		return c.Get(ctx, client.ObjectKeyFromObject(far), far) == nil && far.Status.Phase == kubevirtv1.Failed
	})
	if msg := readyCondition(far).Message; !strings.Contains(msg, `spec.volumes[0].persistentVolumeClaim: claim "far": PersistentVolumeClaim ns/far: PersistentVolume pv-far is not a volume of CSI driver`) {
		t.Errorf("VMI on another node's volume: Ready message %q", msg)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("converge-node vm after cancel: %v", err)
	}
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// TestVMCommandProbesKVM runs converge-node vm --kubeconfig without
// --domain-type: the agent probes KVM (package kvmprobe), logs the domain
// type with its reasons and publishes the Node condition converge.dev/KVM
// carrying the same decision as the probe run here. On the machines this
// project runs on (/dev/kvm from kvm_pvm) that is False, KVMIsPVM.
func TestVMCommandProbesKVM(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	want := kvmprobe.Probe(context.Background(), probeOptions(t))
	cp, c, _ := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	crdtest.Install(t, c, "virtualmachineinstances")
	node, err := libvirt.EmptyTestNode(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &safebuffer.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, out, "vm", "--node-name", "n1", "--kubeconfig", kubeconfig, "--libvirt-uri", node,
			"--kvm-probe-timeout", "3s", "--state-dir", dir, "--reserved-memory", "1Mi", "--console-bind-address", "")
	}()
	n := &corev1.Node{}
	var cond *corev1.NodeCondition
	controlplane.Eventually(t, 60*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("converge-node vm ended early: %v\n%s", err, out.String())
		default:
		}
		if c.Get(ctx, client.ObjectKey{Name: "n1"}, n) != nil {
			return false
		}
		cond = nodeCondition(n, v1alpha1.KVMCondition)
		return cond != nil
	})
	wantStatus := corev1.ConditionFalse
	if want.DomainType == kvmprobe.DomainTypeKVM {
		wantStatus = corev1.ConditionTrue
	}
	if cond.Status != wantStatus || cond.Reason != want.Reason {
		t.Errorf("condition %s = %s %s %q, want %s %s (the probe here: %s)", cond.Type, cond.Status, cond.Reason, cond.Message, wantStatus, want.Reason, want.Message)
	}
	t.Logf("Node n1 %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
	if !strings.Contains(out.String(), `"msg":"domain type","type":"`+want.DomainType+`","reason":"`+want.Reason+`"`) {
		t.Errorf("no domain type log line for %s %s in:\n%s", want.DomainType, want.Reason, out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("converge-node vm after cancel: %v", err)
	}
}

// probeOptions are the probe's defaults with a 3 s guest timeout.
func probeOptions(t *testing.T) kvmprobe.Options {
	o := kvmprobe.DefaultOptions()
	o.Guest.Timeout, o.Guest.Dir = 3*time.Second, t.TempDir()
	return o
}
