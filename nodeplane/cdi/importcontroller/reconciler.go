package importcontroller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/nodeplane/cdi/importer"
)

// ReasonImportFailed is the Running reason of a failure that carries no
// importer.Reason (a blank image that cannot be written, a missing CA
// ConfigMap), and the reason of the Warning Event after every failed run.
const ReasonImportFailed = "ImportFailed"

// permanent are the importer reasons a rerun would only repeat.
var permanent = []importer.Reason{importer.ReasonChecksumMismatch, importer.ReasonNotAnImage, importer.ReasonTooBig, importer.ReasonInvalidInput}

// Reconciler imports one DataVolume per request when its PVC is Bound to a
// volume of this node. Client reads from the cache and writes; Reader
// reads from the API server (fresh status, the checksum field the typed
// DataVolume drops).
type Reconciler struct {
	Client  client.Client
	Reader  client.Reader
	Options Options
	// Events receives the DataVolume Events (see EventImportInProgress);
	// nil records none.
	Events record.EventRecorder
}

// Reconcile runs the import of req's DataVolume to the end (Succeeded or
// Failed, with reruns and backoff in between) when it is this node's and
// not final. It returns an error for API failures and for a volume of
// this node that cannot be resolved (retried with backoff).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dv := &cdiv1.DataVolume{}
	if err := r.Client.Get(ctx, req.NamespacedName, dv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if dv.DeletionTimestamp != nil || dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed {
		return ctrl.Result{}, nil
	}
	if datavolume.IsUpload(dv) {
		return ctrl.Result{}, nil // the upload server (nodeplane/cdi/uploadserver) fills it
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || !isControlledBy(pvc, dv) {
		return ctrl.Result{}, nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	vol, ours, err := Resolve(pv, r.Options)
	if !ours {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("DataVolume %s: %w", req, err)
	}
	kind, err := datavolume.SourceKind(dv)
	if err != nil {
		return ctrl.Result{}, nil // the DataVolume controller fails it
	}
	size := claimSize(pvc)
	log := ctrl.LoggerFrom(ctx).WithValues("dataVolume", req.String(), "path", vol.Path)

	inProgress := cdiv1.ImportInProgress
	if datavolume.IsClone(dv) {
		inProgress = cdiv1.CloneInProgress // CDI's host-assisted clone phase
	}
	backoff := r.Options.Backoff
	for {
		started := false
		dv, err = UpdateStatus(ctx, r.Client, r.Reader, req.NamespacedName, func(dv *cdiv1.DataVolume) bool {
			if dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed {
				return false
			}
			started = dv.Status.Phase != inProgress
			dv.Status.Phase = inProgress
			if dv.Status.Progress == "" {
				dv.Status.Progress = "0.00%"
			}
			c := datavolume.SetCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning, corev1.ConditionTrue, "", "Import running on node "+r.Options.NodeName)
			dv.Status.Conditions = datavolume.SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionFalse, datavolume.ReasonTransferRunning, "")
			return true
		})
		if err != nil {
			return ctrl.Result{}, err
		}
		if dv.Status.Phase != inProgress {
			return ctrl.Result{}, nil
		}
		if started {
			event(r.Events, dv, corev1.EventTypeNormal, EventImportInProgress, "Import into %s in progress", pvc.Name)
		}
		// A run of an agent killed mid-import (SIGKILL, OOM, node crash)
		// left its temporary files: they would stay in the volume for good.
		if removed, rerr := importer.RemoveStale(vol.Path); len(removed) > 0 || rerr != nil {
			log.Info("removed temporaries of an interrupted import", "removed", removed, "error", rerr)
		}
		start := time.Now()
		ierr := r.importOnce(ctx, dv, pvc, kind, vol, size)
		if ctx.Err() != nil {
			return ctrl.Result{}, nil // stopping; a restart resumes from ImportInProgress
		}
		if ierr == nil {
			log.Info("import succeeded", "duration", time.Since(start))
			dv, err = UpdateStatus(ctx, r.Client, r.Reader, req.NamespacedName, func(dv *cdiv1.DataVolume) bool {
				dv.Status.Phase = cdiv1.Succeeded
				dv.Status.Progress = "100.0%"
				c := datavolume.SetCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning, corev1.ConditionFalse, datavolume.ReasonCompleted, "Import Complete")
				dv.Status.Conditions = datavolume.SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionTrue, "", "")
				return true
			})
			if err == nil {
				event(r.Events, dv, corev1.EventTypeNormal, EventImportSucceeded, "Successfully imported into PVC %s", pvc.Name)
			}
			return ctrl.Result{}, err
		}
		reason := string(importer.ReasonOf(ierr))
		if reason == "" {
			reason = ReasonImportFailed
		}
		final := slices.Contains(permanent, importer.Reason(reason)) || int(dv.Status.RestartCount) >= r.Options.Retries
		log.Info("import failed", "reason", reason, "error", ierr.Error(), "restartCount", dv.Status.RestartCount, "final", final)
		event(r.Events, dv, corev1.EventTypeWarning, ReasonImportFailed, "Failed to import into PVC %s: %s: %s", pvc.Name, reason, ierr.Error())
		_, err = UpdateStatus(ctx, r.Client, r.Reader, req.NamespacedName, func(dv *cdiv1.DataVolume) bool {
			if final {
				dv.Status.Phase = cdiv1.Failed
			} else {
				dv.Status.RestartCount++
			}
			c := datavolume.SetCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning, corev1.ConditionFalse, reason, ierr.Error())
			dv.Status.Conditions = datavolume.SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionFalse, reason, ierr.Error())
			return true
		})
		if err != nil || final {
			return ctrl.Result{}, err
		}
		select {
		case <-ctx.Done():
			return ctrl.Result{}, nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, max(r.Options.MaxBackoff, r.Options.Backoff))
	}
}

// importOnce runs one import of dv's source into vol.
func (r *Reconciler) importOnce(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim, kind string, vol Volume, size int64) error {
	if kind == datavolume.SourceNone {
		return blank(vol, size)
	}
	key := types.NamespacedName{Namespace: dv.Namespace, Name: dv.Name}
	opts := r.Options.Importer
	opts.ProgressInterval = r.Options.StatusInterval
	opts.Progress = func(p importer.Progress) {
		if p.Percent >= 100 {
			return // written with Succeeded
		}
		_, _ = UpdateStatus(ctx, r.Client, r.Reader, key, func(dv *cdiv1.DataVolume) bool {
			if dv.Status.Phase != cdiv1.ImportInProgress && dv.Status.Phase != cdiv1.CloneInProgress {
				return false
			}
			dv.Status.Progress = cdiv1.DataVolumeProgress(p.String())
			return true
		})
	}
	target := importer.Target{Path: vol.Path, SizeBytes: size}
	if kind == datavolume.SourcePVC || kind == datavolume.SourceRef {
		src, err := r.cloneSource(ctx, dv, pvc)
		if err != nil {
			return err
		}
		_, err = importer.Clone(ctx, src, target, opts)
		return err
	}
	if kind == datavolume.SourceRegistry {
		src, err := r.registrySource(ctx, dv)
		if err != nil {
			return err
		}
		_, err = importer.ImportRegistry(ctx, src, target, opts)
		return err
	}
	h := dv.Spec.Source.HTTP
	if h.SecretRef != "" || len(h.SecretExtraHeaders) > 0 || len(h.ExtraHeaders) > 0 {
		return &importer.Error{URL: h.URL, Reason: importer.ReasonInvalidInput, Err: errors.New("secretRef, extraHeaders and secretExtraHeaders are not supported yet; expected a public or CA-verified URL")}
	}
	src := importer.Source{URL: h.URL}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"})
	if err := r.Reader.Get(ctx, key, u); err != nil {
		return fmt.Errorf("DataVolume %s: reading spec.source.http.checksum: %w", key, err)
	}
	src.Checksum, _, _ = unstructured.NestedString(u.Object, "spec", "source", "http", "checksum")
	if h.CertConfigMap != "" {
		ca, err := r.readCA(ctx, dv, "spec.source.http.certConfigMap", h.CertConfigMap)
		if err != nil {
			return err
		}
		src.CA = ca
	}
	_, err := importer.Import(ctx, src, target, opts)
	return err
}

// readCA gives the PEM CAs of the ConfigMap name in dv's namespace (its
// values, by key), as CDI's certConfigMap; field names it in errors.
func (r *Reconciler) readCA(ctx context.Context, dv *cdiv1.DataVolume, field, name string) ([]byte, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: dv.Namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("DataVolume %s/%s: %s: ConfigMap %s not found; expected a ConfigMap of PEM CAs in namespace %s", dv.Namespace, dv.Name, field, name, dv.Namespace)
		}
		return nil, fmt.Errorf("DataVolume %s/%s: %s: ConfigMap %s: %w", dv.Namespace, dv.Name, field, name, err)
	}
	var pem strings.Builder
	for _, k := range sortedKeys(cm.Data) {
		pem.WriteString(cm.Data[k])
		pem.WriteString("\n")
	}
	return []byte(pem.String()), nil
}

// blank makes the volume a zeroed sparse image of size bytes: a new
// disk.img for Filesystem, the backing file truncated to 0 and regrown for
// Block.
func blank(vol Volume, size int64) error {
	if size <= 0 {
		return fmt.Errorf("blank image %s: the PVC has no size", vol.Path)
	}
	flags := os.O_RDWR | os.O_CREATE
	if vol.Block {
		flags = os.O_RDWR
	}
	f, err := os.OpenFile(vol.Path, flags|os.O_TRUNC|syscallNoFollow, 0o660)
	if err != nil {
		return fmt.Errorf("blank image %s: %w", vol.Path, err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("blank image %s of %d bytes: %w", vol.Path, size, err)
	}
	return nil
}

// claimSize is the PVC's bound capacity, or its request.
func claimSize(pvc *corev1.PersistentVolumeClaim) int64 {
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok && q.Value() > 0 {
		return q.Value()
	}
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.Value()
}

func isControlledBy(pvc *corev1.PersistentVolumeClaim, dv *cdiv1.DataVolume) bool {
	for _, o := range pvc.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.UID == dv.UID {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
