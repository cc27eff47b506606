package uploadserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/nodeclient"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/cdi/importer"
	"github.com/converge-dev/converge/nodeplane/endpoint"
)

// ReasonUploadFailed is the Running/Ready reason of an upload failure
// that carries no importer.Reason.
const ReasonUploadFailed = "UploadFailed"

// permanent are the importer reasons that fail the DataVolume: the same
// bytes would give the same verdict.
var permanent = []importer.Reason{importer.ReasonNotAnImage, importer.ReasonTooBig, importer.ReasonInvalidInput}

// Server is the upload endpoint's http.Handler (see the package doc). Its
// fields are set by NewServer.
type Server struct {
	c      client.Client
	r      client.Reader
	opts   Options
	log    logr.Logger
	mu     sync.Mutex
	active map[types.NamespacedName]bool
}

// NewServer takes a client for status writes, a reader for fresh reads of
// DataVolumes, PVCs, PVs and the public-key ConfigMap (the manager's
// APIReader), and opts (NodeName, Volumes and PublicKeys are used).
func NewServer(c client.Client, r client.Reader, opts Options) *Server {
	return &Server{c: c, r: r, opts: opts, log: opts.Log, active: map[types.NamespacedName]bool{}}
}

// refuse gives a refusal answered with code and the formatted message
// (endpoint.Refuse).
var refuse = endpoint.Refuse

// ServeHTTP accepts POST (or PUT) nodeendpoint.UploadPath with a bearer
// token and the image as body; it answers 200 once the image is in place
// (for nodeendpoint.UploadAsyncPath: once the body is received, the conversion going on
// after, as CDI's upload-async), 401/403/404/409 for a
// refused token or target (nothing written), 400/413 for a body that is
// not an image or too big for the PVC, 500 for other failures. The
// response body is one line of text naming the DataVolume.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != nodeendpoint.UploadPath && r.URL.Path != nodeendpoint.UploadAsyncPath {
		http.Error(w, fmt.Sprintf("%s: not found; uploads go to POST %s or %s", r.URL.Path, nodeendpoint.UploadPath, nodeendpoint.UploadAsyncPath), http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		w.Header().Set("Allow", "POST, PUT")
		http.Error(w, fmt.Sprintf("%s %s: expected POST", r.Method, r.URL.Path), http.StatusMethodNotAllowed)
		return
	}
	key, target, err := s.authorize(r)
	if err == nil {
		err = s.claim(key)
	}
	if err != nil {
		var he *endpoint.Refusal
		if !errors.As(err, &he) {
			he = refuse(http.StatusInternalServerError, "%v", err)
		}
		s.log.Info("upload refused", "code", he.Code, "reason", he.Message, "remote", r.RemoteAddr)
		http.Error(w, he.Message, he.Code)
		return
	}
	b := &body{r: r.Body, size: r.ContentLength, done: make(chan struct{})}
	if r.URL.Path == nodeendpoint.UploadAsyncPath {
		// CDI's upload-async: answer once the body is in, convert after
		go func() {
			defer s.release(key)
			if _, err := s.receive(context.WithoutCancel(r.Context()), b, key, target); err != nil {
				s.log.Info("upload failed", "dataVolume", key.String(), "error", err.Error())
			}
		}()
		<-b.done
		if b.err != nil {
			http.Error(w, fmt.Sprintf("DataVolume %s: receiving the body: %v (see the DataVolume's conditions)", key, b.err), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "DataVolume %s: body received; converting in the background (watch its phase)\n", key)
		return
	}
	defer s.release(key)
	start := time.Now()
	res, err := s.receive(r.Context(), b, key, target)
	if err != nil {
		code := http.StatusInternalServerError
		switch importer.ReasonOf(err) {
		case importer.ReasonTooBig:
			code = http.StatusRequestEntityTooLarge
		case importer.ReasonNotAnImage, importer.ReasonInvalidInput:
			code = http.StatusBadRequest
		}
		s.log.Info("upload failed", "dataVolume", key.String(), "error", err.Error())
		http.Error(w, fmt.Sprintf("DataVolume %s: %v", key, err), code)
		return
	}
	d := time.Since(start)
	s.log.Info("upload complete", "dataVolume", key.String(), "format", res.Format, "bytes", res.DownloadedBytes, "seconds", d.Seconds())
	fmt.Fprintf(w, "DataVolume %s: uploaded %d bytes (%s), virtual size %d\n", key, res.DownloadedBytes, res.Format, res.VirtualSize)
}

// target is where an authorized upload writes.
type target struct {
	vol  importcontroller.Volume
	size int64
}

// authorize checks the bearer token and its DataVolume; nothing is read
// from the body and nothing is written.
func (s *Server) authorize(r *http.Request) (types.NamespacedName, target, error) {
	var none types.NamespacedName
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		return none, target{}, refuse(http.StatusUnauthorized, "expected header Authorization: Bearer <upload token> (from an UploadTokenRequest)")
	}
	ctx := r.Context()
	keys, err := uploadtoken.PublicKeys(ctx, s.r, s.opts.PublicKeys)
	if err != nil {
		return none, target{}, refuse(http.StatusServiceUnavailable, "cannot verify upload tokens yet: %v", err)
	}
	c, err := uploadtoken.Verify(strings.TrimSpace(tok), keys, time.Now())
	if err != nil {
		return none, target{}, refuse(http.StatusUnauthorized, "upload token refused: %v", err)
	}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	if c.Operation != uploadtoken.OperationUpload || c.Resource != uploadtoken.PVCResource {
		return none, target{}, refuse(http.StatusForbidden, "token for %s: operation %q on %s, expected %q on persistentvolumeclaims",
			key, c.Operation, c.Resource.Resource, uploadtoken.OperationUpload)
	}
	dv := &cdiv1.DataVolume{}
	if err := s.r.Get(ctx, key, dv); err != nil {
		if apierrors.IsNotFound(err) {
			return none, target{}, refuse(http.StatusNotFound, "DataVolume %s: not found (the upload token names it)", key)
		}
		return none, target{}, fmt.Errorf("DataVolume %s: %w", key, err)
	}
	if dv.Spec.Source == nil || dv.Spec.Source.Upload == nil {
		return none, target{}, refuse(http.StatusForbidden, "DataVolume %s: expected spec.source.upload, it has another source", key)
	}
	if dv.Status.Phase != cdiv1.UploadReady {
		return none, target{}, refuse(http.StatusConflict, "DataVolume %s: phase %q, uploads are accepted in phase UploadReady", key, dv.Status.Phase)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.r.Get(ctx, key, pvc); err != nil {
		return none, target{}, refuse(http.StatusConflict, "DataVolume %s: PVC: %v", key, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || !metav1.IsControlledBy(pvc, dv) {
		return none, target{}, refuse(http.StatusConflict, "DataVolume %s: expected its PVC Bound and controlled by it", key)
	}
	pv := &corev1.PersistentVolume{}
	if err := s.r.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return none, target{}, fmt.Errorf("DataVolume %s: PersistentVolume %s: %w", key, pvc.Spec.VolumeName, err)
	}
	vol, ours, err := importcontroller.Resolve(pv, s.opts.Volumes)
	if !ours {
		return none, target{}, refuse(http.StatusForbidden, "DataVolume %s: PersistentVolume %s is not a volume of node %s; upload to the node %q",
			key, pv.Name, s.opts.Volumes.NodeName, nodeclient.NodeOfPV(pv))
	}
	if err != nil {
		return none, target{}, fmt.Errorf("DataVolume %s: %w", key, err)
	}
	size := int64(0)
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		size = q.Value()
	} else if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		size = q.Value()
	}
	return key, target{vol: vol, size: size}, nil
}

// claim admits one upload per DataVolume at a time.
func (s *Server) claim(key types.NamespacedName) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[key] {
		return refuse(http.StatusConflict, "DataVolume %s: an upload is already in progress", key)
	}
	s.active[key] = true
	return nil
}

func (s *Server) release(key types.NamespacedName) {
	s.mu.Lock()
	delete(s.active, key)
	s.mu.Unlock()
}

// receive streams r's body through the importer into t and writes the
// DataVolume's status along the way.
func (s *Server) receive(ctx context.Context, b *body, key types.NamespacedName, t target) (importer.Result, error) {
	defer b.finish(errors.New("the upload stopped before its body was read"))
	running := func(dv *cdiv1.DataVolume) bool {
		if dv.Status.Phase != cdiv1.UploadReady {
			return false
		}
		dv.Status.Progress = "0.00%"
		c := datavolume.SetCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning, corev1.ConditionTrue, "", "Upload running on node "+s.opts.Volumes.NodeName)
		dv.Status.Conditions = datavolume.SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionFalse, datavolume.ReasonTransferRunning, "")
		return true
	}
	var err error
	if err = updateStatus(ctx, s.c, s.r, key, running); err != nil {
		return importer.Result{}, err
	}
	iopts := s.opts.Volumes.Importer
	iopts.Retries = 0 // the body cannot be read twice
	iopts.Progress = func(p importer.Progress) {
		pct := cdiv1.DataVolumeProgress(p.String())
		_ = updateStatus(ctx, s.c, s.r, key, func(dv *cdiv1.DataVolume) bool {
			if dv.Status.Phase != cdiv1.UploadReady {
				return false
			}
			dv.Status.Progress = pct
			return true
		})
	}
	res, ierr := importer.ImportReader(ctx, b, b.size, importer.Target{Path: t.vol.Path, SizeBytes: t.size}, iopts)
	if ierr != nil {
		b.finish(ierr)
	}
	// the status is written even when the client went away
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if ierr == nil {
		err = updateStatus(wctx, s.c, s.r, key, func(dv *cdiv1.DataVolume) bool {
			dv.Status.Phase, dv.Status.Progress = cdiv1.Succeeded, "100.0%"
			c := datavolume.SetCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning, corev1.ConditionFalse, datavolume.ReasonCompleted, "Upload Complete")
			dv.Status.Conditions = datavolume.SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionTrue, "", "")
			return true
		})
		return res, err
	}
	reason := string(importer.ReasonOf(ierr))
	if reason == "" {
		reason = ReasonUploadFailed
	}
	msg := strings.ReplaceAll(ierr.Error(), "stream to "+t.vol.Path, "upload to "+t.vol.Path)
	final := slices.Contains(permanent, importer.Reason(reason))
	_ = updateStatus(wctx, s.c, s.r, key, func(dv *cdiv1.DataVolume) bool {
		if final {
			dv.Status.Phase = cdiv1.Failed
		}
		c := datavolume.SetCondition(dv.Status.Conditions, cdiv1.DataVolumeRunning, corev1.ConditionFalse, reason, msg)
		dv.Status.Conditions = datavolume.SetCondition(c, cdiv1.DataVolumeReady, corev1.ConditionFalse, reason, msg)
		return true
	})
	return res, &uploadError{msg: msg, err: ierr}
}

// uploadError carries the message written to the DataVolume while keeping
// the importer's error for ReasonOf.
type uploadError struct {
	msg string
	err error
}

func (e *uploadError) Error() string { return e.msg }
func (e *uploadError) Unwrap() error { return e.err }
