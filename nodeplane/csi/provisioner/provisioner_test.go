package provisioner_test

import (
	"context"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/csi/provisioner"
	"github.com/converge-dev/converge/nodeplane/csi/resizer"
)

const (
	node      = "node-a"
	ns        = "default"
	wffcClass = "hostpath-csi-local"
)

type fixture struct {
	c    client.Client
	cs   kubernetes.Interface
	pool string
	// pools maps each started node to its pool "local", drivers to its
	// driver.
	pools   map[string]string
	drivers map[string]*hostpath.Driver
	// snaps is a snapshot.storage.k8s.io client (the CRDs are installed
	// by the tests that restore, see installSnapshotCRDs).
	snaps snapclientset.Interface
	cfg   *rest.Config
}

// start runs the control plane with kube-controller-manager's PV
// controllers, a hostpath driver for node-a with pool "local" (in-process,
// no socket served: provisioning needs no root), its provisioner and its
// resizer.
func start(t *testing.T) *fixture {
	t.Helper()
	env, c := controlplane.StartWithControllerManagerForTest(t, controlplane.PersistentVolumeControllers...)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := snapclientset.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{c: c, cs: cs, pools: map[string]string{}, drivers: map[string]*hostpath.Driver{}, snaps: snaps, cfg: env.Config}
	f.pool = f.startNode(t, node)
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	del := corev1.PersistentVolumeReclaimDelete
	f.mk(t, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: wffcClass}, Provisioner: hostpath.DefaultDriverName,
		Parameters: map[string]string{"storagePool": "local"}, VolumeBindingMode: &wffc, ReclaimPolicy: &del})
	f.mk(t, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-immediate"}, Provisioner: hostpath.DefaultDriverName,
		Parameters: map[string]string{"storagePool": "local"}, VolumeBindingMode: &immediate})
	return f
}

func (f *fixture) mk(t *testing.T, o client.Object) {
	t.Helper()
	if err := f.c.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// startNode creates Node n and runs a hostpath driver for it with pools
// "local" and "other", its provisioner and its resizer until t's cleanup; it gives the
// path of pool "local".
func (f *fixture) startNode(t *testing.T, n string) string {
	t.Helper()
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool")
	opts := hostpath.DefaultOptions()
	opts.Endpoint = "unix://" + filepath.Join(dir, "csi.sock")
	opts.NodeID = n
	opts.Pools = []hostpath.Pool{{Name: "local", Path: pool}, {Name: "other", Path: filepath.Join(dir, "other")}}
	d, err := hostpath.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	po := provisioner.DefaultOptions()
	po.Client, po.Identity, po.Controller, po.Node = f.cs, d.Identity(), d.Controller(), d.Node()
	po.Snapshots = f.snaps
	ctx, cancel := context.WithCancel(context.Background())
	p, err := provisioner.New(ctx, po)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != hostpath.DefaultDriverName || p.NodeID() != n {
		t.Fatalf("provisioner name/node = %s/%s, want %s/%s", p.Name(), p.NodeID(), hostpath.DefaultDriverName, n)
	}
	ro := resizer.DefaultOptions()
	ro.Client, ro.Identity, ro.Controller, ro.Node = f.cs, d.Identity(), d.Controller(), d.Node()
	ro.RetryMin = 100 * time.Millisecond
	r, err := resizer.New(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	done, rdone := make(chan struct{}), make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	go func() { r.Run(ctx); close(rdone) }()
	t.Cleanup(func() { cancel(); <-done; <-rdone; d.Close() })
	f.mk(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{hostpath.TopologyKey: n}}})
	f.pools[n], f.drivers[n] = pool, d
	return pool
}

func (f *fixture) claim(t *testing.T, name, class, size string, block bool) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if block {
		m := corev1.PersistentVolumeBlock
		pvc.Spec.VolumeMode = &m
	}
	if err := f.c.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// selectNode sets the selected-node annotation, as kube-scheduler does
// when it places the claim's first consumer.
func (f *fixture) selectNode(t *testing.T, pvc *corev1.PersistentVolumeClaim, n string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"` + provisioner.AnnSelectedNode + `":"` + n + `"}}}`)
	if err := f.c.Patch(context.Background(), pvc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) waitBound(t *testing.T, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	t.Helper()
	got := &corev1.PersistentVolumeClaim{}
	controlplane.Eventually(t, 60*time.Second, func() bool {
		return f.c.Get(context.Background(), client.ObjectKeyFromObject(pvc), got) == nil && got.Status.Phase == corev1.ClaimBound
	})
	pv := &corev1.PersistentVolume{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: got.Spec.VolumeName}, pv); err != nil {
		t.Fatalf("PVC %s bound to %s: %v", pvc.Name, got.Spec.VolumeName, err)
	}
	return pv
}

func (f *fixture) events(t *testing.T, pvc *corev1.PersistentVolumeClaim) []corev1.Event {
	t.Helper()
	var l corev1.EventList
	if err := f.c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range l.Items {
		if e.InvolvedObject.Kind == "PersistentVolumeClaim" && e.InvolvedObject.Name == pvc.Name {
			out = append(out, e)
		}
	}
	return out
}

func (f *fixture) waitEvent(t *testing.T, pvc *corev1.PersistentVolumeClaim, reason, contains string) corev1.Event {
	t.Helper()
	var found corev1.Event
	controlplane.Eventually(t, 60*time.Second, func() bool {
		for _, e := range f.events(t, pvc) {
			if e.Reason == reason && strings.Contains(e.Message, contains) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// TestProvisionBindDelete: a WaitForFirstConsumer PVC waits (kube-controller-
// manager says so in an event) until the selected node is set; then the
// provisioner creates the volume in the pool through the driver, the PV
// names the node in its affinity and carries the CSI source, KCM binds it;
// deleting the PVC deletes the PV (Delete policy) and the volume's
// directory. Block claims get a sparse disk file.
func TestProvisionBindDelete(t *testing.T) {
	f := start(t)
	for _, tc := range []struct {
		name  string
		block bool
		data  string // file or directory the volume's data lives in
	}{
		{"filesystem", false, "data"},
		{"block", true, "disk.img"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc := f.claim(t, "vm-disk-"+tc.name, wffcClass, "10Mi", tc.block)
			f.waitEvent(t, pvc, "WaitForFirstConsumer", "waiting for first consumer")
			start := time.Now()
			f.selectNode(t, pvc, node)
			pv := f.waitBound(t, pvc)
			t.Logf("%s: selected-node set → PVC Bound in %s", tc.name, time.Since(start))

			if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != hostpath.DefaultDriverName || pv.Spec.CSI.VolumeHandle != pv.Name {
				t.Fatalf("PV %s CSI source = %+v, want driver %s, handle %s", pv.Name, pv.Spec.CSI, hostpath.DefaultDriverName, pv.Name)
			}
			if pv.Spec.CSI.VolumeAttributes["storagePool"] != "local" {
				t.Errorf("PV %s volumeAttributes = %v, want storagePool=local", pv.Name, pv.Spec.CSI.VolumeAttributes)
			}
			terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != hostpath.TopologyKey || terms[0].MatchExpressions[0].Values[0] != node {
				t.Errorf("PV %s node affinity = %+v, want %s In [%s]", pv.Name, terms, hostpath.TopologyKey, node)
			}
			if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("10Mi")) < 0 {
				t.Errorf("PV %s capacity %s, want at least 10Mi", pv.Name, q.String())
			}
			wantMode := corev1.PersistentVolumeFilesystem
			if tc.block {
				wantMode = corev1.PersistentVolumeBlock
			}
			if *pv.Spec.VolumeMode != wantMode || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != wffcClass {
				t.Errorf("PV %s: mode %s, reclaim %s, class %s; want %s, Delete, %s", pv.Name, *pv.Spec.VolumeMode, pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName, wantMode, wffcClass)
			}
			vol := filepath.Join(f.pool, pv.Spec.CSI.VolumeHandle)
			st, err := os.Stat(filepath.Join(vol, tc.data))
			if err != nil {
				t.Fatalf("volume data in the pool: %v", err)
			}
			if tc.block && st.Size() != 10<<20 {
				t.Errorf("block disk file %d bytes, want %d", st.Size(), 10<<20)
			}

			start = time.Now()
			if err := f.c.Delete(context.Background(), pvc); err != nil {
				t.Fatal(err)
			}
			controlplane.Eventually(t, 60*time.Second, func() bool {
				return apierrors.IsNotFound(f.c.Get(context.Background(), client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{}))
			})
			t.Logf("%s: PVC deleted → PV gone in %s", tc.name, time.Since(start))
			if _, err := os.Stat(vol); !os.IsNotExist(err) {
				t.Errorf("volume directory %s after PV deletion: %v, want it gone", vol, err)
			}
		})
	}
}

// TestRefusals: a class with Immediate binding is refused with an event
// naming WaitForFirstConsumer, and creates nothing; a claim whose selected
// node is another node is left alone while this node's claim is bound; a
// ReadWriteMany claim is refused by the driver with an event.
func TestRefusals(t *testing.T) {
	f := start(t)

	imm := f.claim(t, "immediate", "hostpath-immediate", "10Mi", false)
	e := f.waitEvent(t, imm, "ProvisioningFailed", "WaitForFirstConsumer")
	t.Logf("Immediate refused: %s", e.Message)

	elsewhere := f.claim(t, "elsewhere", wffcClass, "10Mi", false)
	f.selectNode(t, elsewhere, "node-b")
	class := wffcClass
	rwx := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rwx-many"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}},
		},
	}
	if err := f.c.Create(context.Background(), rwx); err != nil {
		t.Fatal(err)
	}
	f.selectNode(t, rwx, node)
	e = f.waitEvent(t, rwx, "ProvisioningFailed", "MULTI_NODE_MULTI_WRITER")
	t.Logf("ReadWriteMany refused: %s", e.Message)

	mine := f.claim(t, "mine", wffcClass, "10Mi", false)
	f.selectNode(t, mine, node)
	f.waitBound(t, mine)

	var pvs corev1.PersistentVolumeList
	if err := f.c.List(context.Background(), &pvs); err != nil {
		t.Fatal(err)
	}
	if len(pvs.Items) != 1 {
		var names []string
		for _, pv := range pvs.Items {
			names = append(names, pv.Name+"→"+pv.Spec.ClaimRef.Name)
		}
		t.Errorf("PVs = %v, want only the one of claim mine", names)
	}
	entries, err := os.ReadDir(f.pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("pool holds %d entries, want 1 (claim mine's volume)", len(entries))
	}
	for _, pvc := range []*corev1.PersistentVolumeClaim{imm, elsewhere, rwx} {
		got := &corev1.PersistentVolumeClaim{}
		if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(pvc), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.ClaimPending || got.Spec.VolumeName != "" {
			t.Errorf("PVC %s: phase %s volume %q, want Pending and unbound", pvc.Name, got.Status.Phase, got.Spec.VolumeName)
		}
	}
}
