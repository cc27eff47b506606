package receiver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// PathPrefix is the URL path prefix of every hook; mount the Handler on it.
const PathPrefix = "/hook/"

// TokenKey is the key of the token in the receiver's Secret (Flux's
// Receiver uses the same key).
const TokenKey = "token"

// DefaultMaxBodyBytes is the body size limit when Handler.MaxBodyBytes
// is 0: 1 MiB.
const DefaultMaxBodyBytes int64 = 1 << 20

// Path returns "/hook/<namespace>/<name>", the URL path of a Sync's hook.
func Path(key types.NamespacedName) string {
	return PathPrefix + key.Namespace + "/" + key.Name
}

// Handler serves POST /hook/<namespace>/<name> (see the package doc for
// what each header must contain and what each status code means). Its
// fields are read-only once it serves; it is safe for concurrent use.
type Handler struct {
	// Reader reads Syncs and Secrets; the controller passes its API reader
	// (mgr.GetAPIReader()). Its scheme must know v1alpha1.Sync and
	// corev1.Secret.
	Reader client.Reader
	// Trigger is called, synchronously, with the Sync's key after an
	// authenticated push that passed the ref filter (the controller
	// enqueues a reconcile). It must not block for long. Required.
	Trigger func(types.NamespacedName)
	// Log receives one line per request handled (the zero Logger discards).
	Log logr.Logger
	// MaxBodyBytes limits the request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// ServeHTTP handles one webhook request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, "method %s not allowed: use POST", r.Method)
		return
	}
	key, ok := parsePath(r.URL.Path)
	if !ok {
		reply(w, http.StatusNotFound, "not found: want POST %s<namespace>/<name>", PathPrefix)
		return
	}
	log := h.Log.WithValues("sync", key.String())
	limit := h.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	if r.ContentLength > limit {
		reply(w, http.StatusRequestEntityTooLarge, "body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)
		return
	}

	s, token, status, err := h.lookup(r, key)
	if status == http.StatusNotFound {
		log.Info("webhook refused: "+err.Error(), "status", status)
		reply(w, status, "no receiver for %s", key)
		return
	}
	if err != nil {
		log.Error(err, "webhook refused", "status", status)
		reply(w, status, "receiver for %s cannot verify requests: see the controller log", key)
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			reply(w, http.StatusRequestEntityTooLarge, "body exceeds the limit of %d bytes", limit)
			return
		}
		reply(w, http.StatusBadRequest, "reading the body: %v", err)
		return
	}

	p := detect(r.Header)
	if err := authenticate(p, r.Header, body, token); err != nil {
		log.Info("webhook refused: "+err.Error(), "provider", p.String(), "status", http.StatusUnauthorized)
		reply(w, http.StatusUnauthorized, "%s webhook for %s: %v", p, key, err)
		return
	}

	k, event := classify(p, r.Header)
	switch k {
	case ping:
		log.Info("webhook ping", "provider", p.String())
		reply(w, http.StatusOK, "pong")
		return
	case ignore:
		log.Info("webhook ignored", "provider", p.String(), "event", event)
		reply(w, http.StatusAccepted, "ignored: %s event %q", p, event)
		return
	}

	if s.Spec.Suspend {
		log.Info("webhook ignored: Sync suspended", "provider", p.String())
		reply(w, http.StatusAccepted, "ignored: %s is suspended", key)
		return
	}
	ref, err := pushRef(r.Header.Get("Content-Type"), body)
	if err != nil && p != generic {
		reply(w, http.StatusBadRequest, "%s push for %s: %v", p, key, err)
		return
	}
	if !wants(s.Spec.Source.Ref, ref) {
		log.Info("webhook ignored", "provider", p.String(), "ref", ref)
		reply(w, http.StatusAccepted, "ignored: push to %s", ref)
		return
	}
	if h.Trigger == nil {
		log.Error(errors.New("receiver.Handler.Trigger is nil"), "webhook not handled")
		reply(w, http.StatusInternalServerError, "receiver for %s cannot trigger reconciles: see the controller log", key)
		return
	}
	h.Trigger(key)
	log.Info("reconcile requested by webhook", "provider", p.String(), "event", event, "ref", ref)
	reply(w, http.StatusOK, "reconcile of %s requested", key)
}

// parsePath reads <namespace>/<name> from "/hook/<namespace>/<name>";
// both must be valid Kubernetes names (a DNS label and a DNS subdomain).
func parsePath(path string) (types.NamespacedName, bool) {
	rest, ok := strings.CutPrefix(path, PathPrefix)
	if !ok {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(strings.TrimSuffix(rest, "/"), "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// lookup reads the Sync and its receiver Secret's token. The status is
// 404 when the Sync does not exist or has no spec.receiver, 500 for any
// other failure (unreadable objects, no or empty "token" key), 200 with
// a nil error otherwise.
func (h *Handler) lookup(r *http.Request, key types.NamespacedName) (*v1alpha1.Sync, []byte, int, error) {
	s := &v1alpha1.Sync{}
	if err := h.Reader.Get(r.Context(), key, s); err != nil {
		status := http.StatusInternalServerError
		if apierrors.IsNotFound(err) {
			status = http.StatusNotFound
		}
		return nil, nil, status, fmt.Errorf("Sync %s: %w", key, err)
	}
	if s.Spec.Receiver == nil {
		return nil, nil, http.StatusNotFound, fmt.Errorf("Sync %s: has no spec.receiver", key)
	}
	sk := types.NamespacedName{Namespace: key.Namespace, Name: s.Spec.Receiver.SecretRef.Name}
	sec := &corev1.Secret{}
	if err := h.Reader.Get(r.Context(), sk, sec); err != nil {
		return nil, nil, http.StatusInternalServerError, fmt.Errorf("Secret %s (spec.receiver.secretRef of Sync %s): %w", sk, key, err)
	}
	tok := sec.Data[TokenKey]
	if len(tok) == 0 {
		return nil, nil, http.StatusInternalServerError, fmt.Errorf("Secret %s (spec.receiver.secretRef of Sync %s): want a non-empty key %q", sk, key, TokenKey)
	}
	return s, tok, http.StatusOK, nil
}

// reply writes a one-line text/plain answer.
func reply(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintf(w, format+"\n", args...)
}
