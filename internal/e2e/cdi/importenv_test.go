package cdi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
)

// scName is the chain's StorageClass of the hostpath CSI driver and
// poolDir the name of its storage pool on node.
const (
	scName  = "hostpath-csi"
	poolDir = "local"
)

// env is a real API server with the engine's DataVolume CRD, the
// DataVolume controller and the cdi-importer agent of node-a running in
// one manager, and a storage pool in a temporary directory.
type importEnv struct {
	c      client.Client
	cfg    *rest.Config // admin
	pool   hostpath.Pool
	driver *hostpath.Driver
}

// newImportEnv starts the env; each of with may change the controller's
// and the agent's options (given the admin client) before they start.
func newImportEnv(t *testing.T, with ...func(client.Client, *datavolume.Options, *importcontroller.Options)) *importEnv {
	t.Helper()
	storagetest.RequireTool(t, "qemu-img", "qemu-utils")
	// The managers' logs are not needed (failures show in the DataVolume
	// status the tests check).
	ctrl.SetLogger(logr.Discard())
	e, cp, scheme := newStorageEnv(t)
	c, ctx := e.c, context.Background()
	dvo := datavolume.DefaultOptions()
	dvo.CRDPoll, dvo.SkipNameValidation = 100*time.Millisecond, true
	o := importcontroller.DefaultOptions()
	o.NodeName, o.Pools = node, []hostpath.Pool{e.pool}
	o.Retries, o.Backoff, o.MaxBackoff = 2, 50*time.Millisecond, 100*time.Millisecond
	o.Importer.Retries, o.Importer.Backoff, o.Importer.MaxBackoff = 0, 10*time.Millisecond, 10*time.Millisecond
	o.StatusInterval, o.CRDPoll, o.SkipNameValidation = 100*time.Millisecond, 100*time.Millisecond, true
	for _, f := range with {
		f(c, &dvo, &o)
	}
	mctx := controlplane.RunManagerForTest(t, cp, scheme,
		func(mgr ctrl.Manager) error { return datavolume.Setup(mgr, dvo) },
		func(mgr ctrl.Manager) error { return importcontroller.Setup(mgr, o) })
	// The agent labels its node.
	controlplane.Eventually(t, 30*time.Second, func() bool {
		got := &corev1.Node{}
		return c.Get(ctx, types.NamespacedName{Name: node}, got) == nil && got.Labels[v1alpha1.ImporterNodeLabel] == "true"
	})
	go e.provision(t, mctx)
	return e
}

// newStorageEnv starts the part of an importEnv every import test needs:
// a real API server with the DataVolume and DataSource CRDs, the
// namespace ns, the WaitForFirstConsumer StorageClass scName of the
// hostpath driver, the Ready Node node and the real hostpath driver
// (in-process) with its pool. It gives the environment (no controller
// runs yet) and the control plane and scheme to run managers with.
func newStorageEnv(t *testing.T) (*importEnv, *controlplane.Env, *runtime.Scheme) {
	t.Helper()
	cp, c, scheme := controlplane.StartEnvForTest(t, cdiv1.AddToScheme)
	ctx := context.Background()
	crdtest.Install(t, c, "datavolumes", "datasources")

	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	must(t, c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: scName},
		Provisioner: hostpath.DefaultDriverName, VolumeBindingMode: &wffc}))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	must(t, c.Create(ctx, n))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	must(t, c.Status().Update(ctx, n))

	e := &importEnv{c: c, cfg: cp.Config}
	e.driver, e.pool = storagetest.StartDriver(t, node, poolDir)
	return e, cp, scheme
}

// provision plays the provisioner and the PV controller, which do not
// run in this test (chain_test.go runs the real ones with
// kube-controller-manager): for each PVC of the StorageClass with
// volume.kubernetes.io/selected-node set, it creates the volume through
// the real hostpath driver's CreateVolume (in-process), a CSI PV of the
// driver with node affinity to that node and a claimRef, then binds the
// PVC (spec.volumeName, then status.phase Bound through the status
// subresource), as the PV controller would.
func (e *importEnv) provision(t *testing.T, ctx context.Context) {
	done := map[string]bool{}
	for ctx.Err() == nil {
		list := &corev1.PersistentVolumeClaimList{}
		if err := e.c.List(ctx, list); err == nil {
			for i := range list.Items {
				pvc := &list.Items[i]
				sel := pvc.Annotations[dvapi.AnnSelectedNode]
				if done[string(pvc.UID)] || sel == "" || pvc.Status.Phase == corev1.ClaimBound {
					continue
				}
				if err := e.bind(ctx, pvc, sel); err != nil {
					if ctx.Err() == nil {
						t.Errorf("provisioning PVC %s: %v", pvc.Name, err)
					}
					continue
				}
				done[string(pvc.UID)] = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *importEnv) bind(ctx context.Context, pvc *corev1.PersistentVolumeClaim, nodeName string) error {
	v := storagetest.Volume{ID: "pvc-" + string(pvc.UID), Size: pvc.Spec.Resources.Requests[corev1.ResourceStorage], Pool: e.pool, Node: nodeName,
		Block: pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock}
	if err := v.Create(ctx, e.driver); err != nil {
		return err
	}
	pv := v.PV()
	pv.Spec.AccessModes = pvc.Spec.AccessModes
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	pv.Spec.StorageClassName = scName
	pv.Spec.VolumeMode = pvc.Spec.VolumeMode
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
	if err := e.c.Create(ctx, pv); err != nil {
		return err
	}
	pvc.Spec.VolumeName = pv.Name
	if err := e.c.Update(ctx, pvc); err != nil {
		return err
	}
	return storagetest.MarkBound(ctx, e.c, pvc, v.Size)
}

// createDV creates a DataVolume of size on the test StorageClass with the
// given source, unstructured so converge's checksum extension field can
// be set.
func (e *importEnv) createDV(t *testing.T, name, size string, source map[string]any) {
	t.Helper()
	dv := map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"source":  source,
			"storage": map[string]any{"storageClassName": scName, "resources": map[string]any{"requests": map[string]any{"storage": size}}},
		},
	}
	must(t, e.c.Create(context.Background(), &unstructured.Unstructured{Object: dv}))
}

func (e *importEnv) dv(t *testing.T, name string) *cdiv1.DataVolume {
	t.Helper()
	dv := &cdiv1.DataVolume{}
	must(t, e.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, dv))
	return dv
}

// waitPhase waits for one of the phases and gives the DataVolume.
func (e *importEnv) waitPhase(t *testing.T, name string, phases ...cdiv1.DataVolumePhase) *cdiv1.DataVolume {
	t.Helper()
	var dv *cdiv1.DataVolume
	controlplane.Eventually(t, 60*time.Second, func() bool {
		dv = e.dv(t, name)
		for _, p := range phases {
			if dv.Status.Phase == p {
				return true
			}
		}
		return false
	})
	return dv
}

// diskPath gives the disk.img of the DataVolume's volume.
func (e *importEnv) diskPath(t *testing.T, name string) string {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	must(t, e.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pvc))
	return filepath.Join(e.pool.Path, pvc.Spec.VolumeName, "data", "disk.img")
}

// slowServer serves files by path, in 64 KiB chunks with a pause between
// them so an import lasts long enough for progress to be reported.
type slowServer struct {
	mu    sync.Mutex
	files map[string][]byte
	pause time.Duration
}

func (s *slowServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, ok := s.files[r.URL.Path]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	for off := 0; off < len(b); off += 64 << 10 {
		end := min(off+64<<10, len(b))
		if _, err := w.Write(b[off:end]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		time.Sleep(s.pause)
	}
}

func serve(t *testing.T, s *slowServer) string {
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}

// waitEvents waits until the DataVolume name has at least n Events of
// reason from the agent, and gives all of its Events from the agent.
func waitEvents(t *testing.T, c client.Client, name, reason string, n int) []corev1.Event {
	t.Helper()
	var out []corev1.Event
	controlplane.Eventually(t, 30*time.Second, func() bool {
		l := &corev1.EventList{}
		if err := c.List(context.Background(), l, client.InNamespace(ns)); err != nil {
			return false
		}
		out = nil
		got := 0
		for _, e := range l.Items {
			if e.InvolvedObject.Kind == "DataVolume" && e.InvolvedObject.Name == name && e.Source.Component == importcontroller.EventSource {
				out = append(out, e)
				if e.Reason == reason {
					got += int(max(e.Count, 1))
				}
			}
		}
		return got >= n
	})
	return out
}
