package cdi_test

import (
	"context"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/csi/provisioner"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
)

// chainControllers are the kube-controller-manager controllers the chain
// needs: the PV binder and the PV/PVC protection finalizers, and the
// garbage collector that deletes a DataVolume's PVC through its owner
// reference.
var chainControllers = append(append([]string{}, controlplane.PersistentVolumeControllers...), "garbage-collector-controller")

// chain is the whole storage chain with no stand-in, as a cluster runs it:
// a real kube-apiserver and etcd; kube-controller-manager
// (chainControllers); a controller manager as converge-controller runs it
// (the DataVolume controller, plus what the caller adds); node-a's hostpath
// CSI driver with its PVC provisioner (in-process, as `converge-node
// hostpath-csi --kubeconfig` runs them; no mounts, so no root); and node-a's
// cdi-importer agent through importcontroller.Run, as `converge-node cdi-importer`
// runs it, in its own manager.
type chain struct {
	cp   *controlplane.Env
	c    client.Client
	pool hostpath.Pool
}

// chainOptions are what a chain test adds: controller-side setups (after
// datavolume.Setup, in converge-controller's manager) and a change of the
// agent's options (its Setups, e.g. the upload server).
type chainOptions struct {
	controller []func(ctrl.Manager) error
	agent      func(*importcontroller.Options)
}

// newChain starts the chain (see chain) with namespace ns, StorageClass
// scName (WaitForFirstConsumer, reclaim Delete, pool poolDir) and a Ready
// Node node; it returns once the agent has labelled the Node. Everything
// stops at the test's end. The DataVolume CRD of converge's graph is
// installed before kube-controller-manager starts, so
// its garbage collector watches DataVolumes from the start instead of
// after its next discovery resync (30 s).
func newChain(t *testing.T, co *chainOptions) *chain {
	t.Helper()
	if co == nil {
		co = &chainOptions{}
	}
	storagetest.RequireTool(t, "qemu-img", "qemu-utils")
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) || !controlplane.ControllerManagerAvailable(bin) {
		msg := "kube-apiserver, etcd or kube-controller-manager is not in bin/: run hack/controlplane/build.sh"
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// The managers' logs are not needed (failures show in the DataVolume
	// status the tests check; the kube-controller-manager log is shown).
	ctrl.SetLogger(logr.Discard())
	ctx := context.Background()
	t0 := time.Now()
	cp, c, scheme := controlplane.StartEnvForTest(t, cdiv1.AddToScheme, uploadv1.AddToScheme)
	crdtest.Install(t, c, "datavolumes")
	kcm, err := controlplane.StartControllerManager(cp, chainControllers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager log tail:\n%s", kcm.LogTail(4000))
		}
		kcm.Stop()
	})
	t.Logf("control plane with kube-controller-manager up in %v", time.Since(t0))

	for _, n := range []string{ns, "converge-system"} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	wffc, del := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	must(t, c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: scName},
		Provisioner: hostpath.DefaultDriverName, VolumeBindingMode: &wffc, ReclaimPolicy: &del,
		Parameters: map[string]string{hostpath.ParameterStoragePool: poolDir}}))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{hostpath.TopologyKey: node}}}
	must(t, c.Create(ctx, n))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	must(t, c.Status().Update(ctx, n))

	// node-a: the hostpath driver and its provisioner, one pool.
	dir := t.TempDir()
	pool := hostpath.Pool{Name: poolDir, Path: filepath.Join(dir, "pool")}
	do := hostpath.DefaultOptions()
	do.Endpoint, do.NodeID, do.Pools = "unix://"+filepath.Join(dir, "csi.sock"), node, []hostpath.Pool{pool}
	d, err := hostpath.New(do)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	po := provisioner.DefaultOptions()
	po.Client, po.Identity, po.Controller, po.Node = cs, d.Identity(), d.Controller(), d.Node()
	rctx, cancel := context.WithCancel(ctx)
	p, err := provisioner.New(rctx, po)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	provisioned := make(chan struct{})
	go func() { p.Run(rctx); close(provisioned) }()

	// The control-plane side, as converge-controller runs it.
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	dvo := datavolume.DefaultOptions()
	dvo.CRDPoll, dvo.SkipNameValidation = 100*time.Millisecond, true
	must(t, datavolume.Setup(mgr, dvo))
	for _, s := range co.controller {
		must(t, s(mgr))
	}
	managed := make(chan error, 1)
	go func() { managed <- mgr.Start(rctx) }()

	// node-a's cdi-importer, as converge-node runs it.
	o := importcontroller.DefaultOptions()
	o.NodeName, o.Pools = node, []hostpath.Pool{pool}
	o.StatusInterval, o.CRDPoll, o.SkipNameValidation = 100*time.Millisecond, 100*time.Millisecond, true
	if co.agent != nil {
		co.agent(&o)
	}
	agent := make(chan error, 1)
	go func() { agent <- importcontroller.Run(rctx, cp.Config, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-managed; err != nil {
			t.Errorf("controller manager: %v", err)
		}
		if err := <-agent; err != nil {
			t.Errorf("cdi-importer agent: %v", err)
		}
		<-provisioned
		d.Close()
	})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		got := &corev1.Node{}
		return c.Get(ctx, types.NamespacedName{Name: node}, got) == nil && got.Labels[v1alpha1.ImporterNodeLabel] == "true"
	})
	return &chain{cp: cp, c: c, pool: pool}
}

// stripedImage writes a raw image of size bytes (a multiple of 1 MiB)
// whose first 256 KiB of each MiB are random from seed and the rest holes,
// converts it to qcow2 with qemu-img, and gives the raw bytes, the
// directory and the path of the qcow2 file (disk.qcow2 in it).
func stripedImage(t *testing.T, size int, seed int64) (raw []byte, dir, qcow2Path string) {
	t.Helper()
	dir = t.TempDir()
	raw = make([]byte, size)
	rng := rand.New(rand.NewSource(seed))
	for off := 0; off < size; off += 1 << 20 {
		rng.Read(raw[off : off+256<<10])
	}
	rawPath, qPath := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")
	must(t, os.WriteFile(rawPath, raw, 0o600))
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", rawPath, qPath).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	return raw, dir, qPath
}

// stepper logs how long each step of a chain took after the previous one.
type stepper struct {
	t           *testing.T
	start, last time.Time
}

func newStepper(t *testing.T) *stepper {
	now := time.Now()
	return &stepper{t: t, start: now, last: now}
}

// wait polls cond every 10 ms (a finer grain than controlplane.Eventually,
// for the latency figures), failing after 90 s, and logs the step's
// latency.
func (s *stepper) wait(step string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not within 90s", step)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.done(step)
}

func (s *stepper) done(step string) {
	s.t.Helper()
	now := time.Now()
	s.t.Logf("%-60s +%v", step, now.Sub(s.last).Round(time.Millisecond))
	s.last = now
}

func (s *stepper) total(what string) {
	s.t.Helper()
	s.t.Logf("%s: %v in all", what, time.Since(s.start).Round(time.Millisecond))
}
