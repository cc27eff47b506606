package datavolume

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/operators/cdi/clonetoken"
)

// Reconciler is the DataVolume controller: it creates each DataVolume's
// PVC (NewPVC), places WaitForFirstConsumer imports on a node (PickNode)
// and writes ControllerStatus. Client reads from the manager's cache; CDI
// (Options.CDI, optional) gives the CDI CR whose filesystem overhead the
// PVCs get.
type Reconciler struct {
	Client client.Client
	CDI    func(ctx context.Context) (*unstructured.Unstructured, error)
	// Reader reads DataSources from the API server (not cached: their
	// CRD may come after the controller starts); nil reads through
	// Client.
	Reader client.Reader
	// Tokens checks and extends the clone tokens of clones from another
	// namespace (authorize); nil refuses such clones.
	Tokens *clonetoken.Tokens
}

func (r *Reconciler) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// Reconcile handles one DataVolume. It returns an error (and so a requeue
// with backoff) when an API call fails, including a status write
// conflicting with the node agent's.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dv := &cdiv1.DataVolume{}
	if err := r.Client.Get(ctx, req.NamespacedName, dv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if dv.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, pvc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("DataVolume %s: reading its PVC: %w", req, err)
		}
		pvc = nil
	}
	var cl clone
	if _, kerr := dvapi.SourceKind(dv); kerr == nil && dvapi.IsClone(dv) && !dvapi.Owned(dv.Status.Phase) {
		var err error
		if cl, err = r.resolveClone(ctx, dv); err != nil {
			return ctrl.Result{}, fmt.Errorf("DataVolume %s: %w", req, err)
		}
		if cl.failReason != "" {
			return ctrl.Result{}, r.failWith(ctx, dv, cl.failReason, cl.message)
		}
		if cl.waitReason != "" {
			st := ControllerStatus(dv, pvc, false)
			st.Conditions = dvapi.SetCondition(st.Conditions, cdiv1.DataVolumeRunning, corev1.ConditionFalse, cl.waitReason, cl.message)
			return ctrl.Result{RequeueAfter: cloneWait}, r.writeStatus(ctx, dv, st)
		}
	}
	if pvc == nil && !dvapi.Owned(dv.Status.Phase) {
		overhead, err := r.overhead(ctx, dv)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("DataVolume %s: %w", req, err)
		}
		var want *corev1.PersistentVolumeClaim
		if cl.source != nil {
			want, err = NewClonePVC(dv, overhead, cl.source)
		} else {
			want, err = NewPVC(dv, overhead)
		}
		if err != nil {
			return ctrl.Result{}, r.fail(ctx, dv, err)
		}
		if err := r.Client.Create(ctx, want); err != nil {
			return ctrl.Result{}, fmt.Errorf("DataVolume %s: creating PVC: %w", req, err)
		}
		pvc = want
	}
	if pvc != nil && !metav1.IsControlledBy(pvc, dv) {
		st := *dv.Status.DeepCopy()
		st.Phase = cdiv1.Pending
		st.Conditions = dvapi.SetCondition(st.Conditions, cdiv1.DataVolumeBound, corev1.ConditionFalse, dvapi.ReasonClaimNotOwned,
			fmt.Sprintf("PVC %s exists and is not controlled by DataVolume %s; delete it or rename the DataVolume", pvc.Name, dv.Name))
		return ctrl.Result{}, r.writeStatus(ctx, dv, st)
	}
	wffc := false
	if pvc != nil && pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName != "" {
		sc := &storagev1.StorageClass{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, sc); err == nil {
			wffc = sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
		} else if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("DataVolume %s: reading StorageClass %s: %w", req, *pvc.Spec.StorageClassName, err)
		}
	}
	noNode := false
	if pvc != nil && wffc && pvc.Status.Phase == corev1.ClaimPending && pvc.Annotations[dvapi.AnnSelectedNode] == "" && !dvapi.Owned(dv.Status.Phase) {
		node := cl.node // a clone goes where its source is
		if cl.source == nil {
			var err error
			if node, err = r.pickNode(ctx); err != nil {
				return ctrl.Result{}, fmt.Errorf("DataVolume %s: %w", req, err)
			}
		}
		if node == "" {
			noNode = true
		} else {
			orig := pvc.DeepCopy()
			if pvc.Annotations == nil {
				pvc.Annotations = map[string]string{}
			}
			pvc.Annotations[dvapi.AnnSelectedNode] = node
			if err := r.Client.Patch(ctx, pvc, client.MergeFrom(orig)); err != nil {
				return ctrl.Result{}, fmt.Errorf("DataVolume %s: setting %s=%s on PVC: %w", req, dvapi.AnnSelectedNode, node, err)
			}
		}
	}
	if cl.source != nil && pvc != nil && pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName != "" {
		pv := &corev1.PersistentVolume{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if n := NodeOf(pv); n != cl.node {
			return ctrl.Result{}, r.failWith(ctx, dv, dvapi.ReasonCrossNodeClone, fmt.Sprintf(
				"PVC %s is bound on node %q, its source PVC %s/%s on node %q: converge clones hostpath volumes by copying on the source's node (CDI's host-assisted clone), so both must be on one node; use a WaitForFirstConsumer StorageClass, where the DataVolume controller places the clone on its source's node",
				pvc.Name, n, cl.source.Namespace, cl.source.Name, cl.node))
		}
	}
	if pvc != nil && pvc.DeletionTimestamp == nil {
		if err := r.syncPodAnnotations(ctx, dv, pvc); err != nil {
			return ctrl.Result{}, fmt.Errorf("DataVolume %s: %w", req, err)
		}
	}
	st := ControllerStatus(dv, pvc, wffc)
	if noNode {
		st.Conditions = dvapi.SetCondition(st.Conditions, cdiv1.DataVolumeRunning, corev1.ConditionFalse, dvapi.ReasonNoImporterNode,
			fmt.Sprintf("no Ready node labelled %s=true to import on (is converge-node cdi-importer running?)", v1alpha1.ImporterNodeLabel))
	}
	return ctrl.Result{}, r.writeStatus(ctx, dv, st)
}

// overhead gives the filesystem overhead of dv's claim (Overhead): the
// StorageClass spec.storage (or spec.pvc) names, else the cluster's
// default StorageClass (annotated storageclass.kubernetes.io/
// is-default-class: "true"; the newest, then by name, as CDI's
// GetDefaultStorageClass), else none (the global value).
func (r *Reconciler) overhead(ctx context.Context, dv *cdiv1.DataVolume) (float64, error) {
	if r.CDI == nil || dv.Spec.Storage == nil {
		return 0, nil
	}
	cdi, err := r.CDI(ctx)
	if err != nil || cdi == nil {
		return 0, err
	}
	if name := dv.Spec.Storage.StorageClassName; name != nil {
		return Overhead(cdi, *name)
	}
	list := &storagev1.StorageClassList{}
	if err := r.Client.List(ctx, list); err != nil {
		return 0, fmt.Errorf("listing StorageClasses for the default one: %w", err)
	}
	var def *storagev1.StorageClass
	for i := range list.Items {
		sc := &list.Items[i]
		if sc.Annotations[defaultClassAnnotation] != "true" {
			continue
		}
		if def == nil || sc.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&def.CreationTimestamp) && sc.Name < def.Name) {
			def = sc
		}
	}
	if def == nil {
		return Overhead(cdi, "")
	}
	return Overhead(cdi, def.Name)
}

// defaultClassAnnotation marks the cluster's default StorageClass.
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// pickNode lists nodes and placed PVCs from the cache and applies PickNode;
// every DataVolume PVC counts (AnnSource is http, none or upload).
func (r *Reconciler) pickNode(ctx context.Context) (string, error) {
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.MatchingLabels{v1alpha1.ImporterNodeLabel: "true"}); err != nil {
		return "", fmt.Errorf("listing importer nodes: %w", err)
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.Client.List(ctx, pvcs); err != nil {
		return "", fmt.Errorf("listing PVCs: %w", err)
	}
	placed := map[string]int{}
	for _, p := range pvcs.Items {
		if n := p.Annotations[dvapi.AnnSelectedNode]; n != "" && (p.Annotations[dvapi.AnnSource] != "" || p.Annotations[dvapi.AnnCloneRequest] != "") {
			placed[n]++
		}
	}
	return PickNode(nodes.Items, placed), nil
}

// fail marks dv Failed because its spec cannot be served (cause names it).
func (r *Reconciler) fail(ctx context.Context, dv *cdiv1.DataVolume, cause error) error {
	reason := dvapi.ReasonInvalidSpec
	if _, err := dvapi.SourceKind(dv); err != nil {
		reason = dvapi.ReasonUnsupportedSource
	}
	return r.failWith(ctx, dv, reason, cause.Error())
}

// cloneWait is how often a clone waiting for its source looks again.
const cloneWait = 3 * time.Second

// failWith marks dv Failed with reason and message on Running and Ready.
func (r *Reconciler) failWith(ctx context.Context, dv *cdiv1.DataVolume, reason, message string) error {
	st := *dv.Status.DeepCopy()
	st.Phase = cdiv1.Failed
	st.Conditions = dvapi.SetCondition(st.Conditions, cdiv1.DataVolumeBound, corev1.ConditionFalse, dvapi.ReasonNotFound, "No PVC found")
	st.Conditions = dvapi.SetCondition(st.Conditions, cdiv1.DataVolumeRunning, corev1.ConditionFalse, reason, message)
	st.Conditions = dvapi.SetCondition(st.Conditions, cdiv1.DataVolumeReady, corev1.ConditionFalse, reason, message)
	return r.writeStatus(ctx, dv, st)
}

// writeStatus writes st if it differs from dv's (optimistic: a conflict
// with the node agent returns an error and the request is retried).
func (r *Reconciler) writeStatus(ctx context.Context, dv *cdiv1.DataVolume, st cdiv1.DataVolumeStatus) error {
	if equality.Semantic.DeepEqual(dv.Status, st) {
		return nil
	}
	dv = dv.DeepCopy()
	dv.Status = st
	if err := r.Client.Status().Update(ctx, dv); err != nil {
		return fmt.Errorf("DataVolume %s/%s: writing status: %w", dv.Namespace, dv.Name, err)
	}
	return nil
}

// syncPodAnnotations patches the PVC's PodAnnotations to dv's when they
// differ.
func (r *Reconciler) syncPodAnnotations(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim) error {
	want := PodAnnotations(dv)
	orig := pvc.DeepCopy()
	changed := false
	for k, v := range want {
		if pvc.Annotations[k] != v {
			if pvc.Annotations == nil {
				pvc.Annotations = map[string]string{}
			}
			pvc.Annotations[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	if err := r.Client.Patch(ctx, pvc, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("setting CDI's pod annotations on PVC %s: %w", pvc.Name, err)
	}
	return nil
}
