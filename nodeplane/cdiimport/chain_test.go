package cdiimport_test

import (
	"bytes"
	"context"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/datavolume"
	"github.com/converge-dev/converge/internal/controlplane"
	"github.com/converge-dev/converge/nodeplane/cdiimport"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/csi/provisioner"
)

// chainControllers are the kube-controller-manager controllers the chain
// needs: the PV binder and the PV/PVC protection finalizers, and the
// garbage collector that deletes a DataVolume's PVC through its owner
// reference.
var chainControllers = append(append([]string{}, controlplane.PersistentVolumeControllers...), "garbage-collector-controller")

// TestChain runs the whole storage chain with no stand-in: a real
// kube-apiserver and etcd; kube-controller-manager (PV binder, PV/PVC
// protection, garbage collector); the DataVolume controller and the
// cdi-importer agent of node-a in one manager; the hostpath CSI driver of
// node-a with its PVC provisioner (in-process, as `converge-node
// hostpath-csi --kubeconfig` runs them; no mounts, so no root); and a
// qcow2 image made with qemu-img served on loopback.
//
// A DataVolume of StorageClass hostpath-csi (WaitForFirstConsumer, pool
// "local") goes: DataVolume controller creates the PVC and selects node-a
// → the provisioner creates the volume in the pool and its PV → KCM binds
// the PVC → the agent imports → Succeeded, and <pool>/<pv>/data/disk.img
// equals the raw image byte for byte. Deleting the DataVolume then removes
// the PVC (garbage collector), the PV (reclaim Delete, by the provisioner)
// and the volume directory. Each step's latency is logged.
func TestChain(t *testing.T) {
	requireTool(t, "qemu-img")
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) || !controlplane.ControllerManagerAvailable(bin) {
		msg := "kube-apiserver, etcd or kube-controller-manager is not in bin/: run hack/controlplane/build.sh"
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx := context.Background()
	t0 := time.Now()
	cp, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	scheme := newScheme()
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The CRD goes in before kube-controller-manager starts, so its
	// garbage collector watches DataVolumes from the start instead of
	// after its next discovery resync (30 s).
	installDataVolumeCRD(t, c)
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

	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	wffc, del := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	must(t, c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: scName},
		Provisioner: hostpath.DefaultDriverName, VolumeBindingMode: &wffc, ReclaimPolicy: &del,
		Parameters: map[string]string{hostpath.ParameterStoragePool: poolDir}}))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{hostpath.TopologyKey: node}}}
	must(t, c.Create(ctx, n))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
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

	// The control-plane side (DataVolume controller) and node-a's
	// cdi-importer, as converge-controller and converge-node run them.
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	dvo := datavolume.DefaultOptions()
	dvo.CRDPoll, dvo.SkipNameValidation = 100*time.Millisecond, true
	must(t, datavolume.Setup(mgr, dvo))
	o := cdiimport.DefaultOptions()
	o.NodeName, o.Pools = node, []hostpath.Pool{pool}
	o.StatusInterval, o.CRDPoll, o.SkipNameValidation = 100*time.Millisecond, 100*time.Millisecond, true
	must(t, cdiimport.Setup(mgr, o))
	managed := make(chan error, 1)
	go func() { managed <- mgr.Start(rctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-managed; err != nil {
			t.Errorf("manager: %v", err)
		}
		<-provisioned
		d.Close()
	})
	controlplane.Eventually(t, 30*time.Second, func() bool {
		got := &corev1.Node{}
		return c.Get(ctx, types.NamespacedName{Name: node}, got) == nil && got.Labels[datavolume.ImporterNodeLabel] == "true"
	})

	// A 16 MiB raw image of random stripes and holes, served as qcow2; the
	// PVC has the same size, so the imported disk must equal it exactly.
	const size = 16 << 20
	img := t.TempDir()
	raw := make([]byte, size)
	rng := rand.New(rand.NewSource(7))
	for off := 0; off < size; off += 1 << 20 {
		rng.Read(raw[off : off+256<<10])
	}
	rawPath, qPath := filepath.Join(img, "disk.raw"), filepath.Join(img, "disk.qcow2")
	must(t, os.WriteFile(rawPath, raw, 0o600))
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", rawPath, qPath).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	qcow2, err := os.ReadFile(qPath)
	must(t, err)
	srv := httptest.NewServer(http.FileServer(http.Dir(img)))
	t.Cleanup(srv.Close)

	// Import.
	key := types.NamespacedName{Namespace: ns, Name: "fedora"}
	steps := newStepper(t)
	must(t, c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
		"metadata": map[string]any{"name": key.Name, "namespace": key.Namespace},
		"spec": map[string]any{
			"source":  map[string]any{"http": map[string]any{"url": srv.URL + "/disk.qcow2", "checksum": sha(qcow2)}},
			"storage": map[string]any{"storageClassName": scName, "resources": map[string]any{"requests": map[string]any{"storage": "16Mi"}}},
		},
	}}))
	steps.done("DataVolume created")
	pvc := &corev1.PersistentVolumeClaim{}
	getPVC := func() bool { return c.Get(ctx, key, pvc) == nil }
	steps.wait("PVC created by the DataVolume controller", getPVC)
	steps.wait("node selected (volume.kubernetes.io/selected-node)", func() bool {
		return getPVC() && pvc.Annotations[datavolume.AnnSelectedNode] != ""
	})
	if got := pvc.Annotations[datavolume.AnnSelectedNode]; got != node {
		t.Fatalf("PVC %s: selected node %q, want %s", key, got, node)
	}
	pvName := "pvc-" + string(pvc.UID) // the provisioner library's PV name
	pv := &corev1.PersistentVolume{}
	steps.wait("PV "+pvName+" created by the provisioner", func() bool { return c.Get(ctx, types.NamespacedName{Name: pvName}, pv) == nil })
	steps.wait("PVC Bound by kube-controller-manager", func() bool {
		return getPVC() && pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName == pvName
	})
	dv := &cdiv1.DataVolume{}
	steps.wait("DataVolume Succeeded (import by the cdi-importer)", func() bool {
		return c.Get(ctx, key, dv) == nil && (dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed)
	})
	if dv.Status.Phase != cdiv1.Succeeded {
		t.Fatalf("DataVolume %s: phase %s, want Succeeded; conditions %+v", key, dv.Status.Phase, dv.Status.Conditions)
	}
	wantCond(t, dv, cdiv1.DataVolumeReady, corev1.ConditionTrue, "")
	wantCond(t, dv, cdiv1.DataVolumeBound, corev1.ConditionTrue, datavolume.ReasonBound)
	wantEvent(t, waitEvents(t, c, key.Name, cdiimport.EventImportSucceeded, 1), corev1.EventTypeNormal, cdiimport.EventImportSucceeded, "Successfully imported into PVC "+key.Name)
	if pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle != pvName || pv.Spec.CSI.VolumeAttributes[hostpath.ParameterStoragePool] != poolDir {
		t.Errorf("PV %s: CSI source %+v, want handle %s in pool %s", pvName, pv.Spec.CSI, pvName, poolDir)
	}
	disk := filepath.Join(pool.Path, pvName, "data", cdiimport.DiskImage)
	got, err := os.ReadFile(disk)
	must(t, err)
	if !bytes.Equal(got, raw) {
		t.Fatalf("%s: %d bytes, sha %s; want the %d-byte raw image, sha %s", disk, len(got), sha(got), len(raw), sha(raw))
	}
	if a := allocated(t, disk); a >= size {
		t.Errorf("%s: %d bytes allocated for %d, want sparse (3/4 of the image is holes)", disk, a, size)
	} else {
		t.Logf("%s equals the raw image (%d bytes, %d allocated); qcow2 was %d bytes", disk, size, a, len(qcow2))
	}
	steps.total("import chain")

	// Delete the DataVolume: everything it made goes.
	steps = newStepper(t)
	must(t, c.Delete(ctx, dv))
	steps.wait("DataVolume gone", func() bool { return apierrors.IsNotFound(c.Get(ctx, key, &cdiv1.DataVolume{})) })
	steps.wait("PVC gone (garbage collector, PVC protection)", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, key, &corev1.PersistentVolumeClaim{}))
	})
	steps.wait("PV gone (reclaim Delete by the provisioner)", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Name: pvName}, &corev1.PersistentVolume{}))
	})
	if _, err := os.Stat(filepath.Join(pool.Path, pvName)); !os.IsNotExist(err) {
		t.Errorf("volume directory %s still there after its PV is gone (stat: %v)", filepath.Join(pool.Path, pvName), err)
	}
	left, err := os.ReadDir(pool.Path)
	must(t, err)
	if len(left) != 0 {
		t.Errorf("pool %s not empty after the DataVolume is deleted: %v", pool.Path, left)
	}
	steps.total("deletion chain")
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
