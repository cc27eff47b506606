package receiver

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// PathPrefix is the URL path prefix of every hook (Flux's
// ReceiverWebhookPath); mount the Handler on it.
const PathPrefix = "/hook/"

// TokenKey is the key of the token in the receiver's Secret (Flux's
// Receiver uses the same key). The Sync controller reads it.
const TokenKey = "token"

// DefaultMaxBodyBytes is the body size limit when Handler.MaxBodyBytes
// is 0: 1 MiB.
const DefaultMaxBodyBytes int64 = 1 << 20

// Handler serves POST PathPrefix+<digest> (see the package doc for what
// each header must contain and what each status code means). Its fields
// are read-only once it serves; it is safe for concurrent use.
type Handler struct {
	// Index leads a request path to its Sync and token; the Sync
	// controller fills it. A nil Index knows no path.
	Index *Index
	// Reader reads the Sync of an authenticated request (its spec.suspend
	// and spec.source.ref); the controller passes its cached client
	// (mgr.GetClient()), so that no request costs an API call. Its scheme
	// must know v1alpha1.Sync.
	Reader client.Reader
	// Trigger is called, synchronously, with the Sync's key after an
	// authenticated push that passed the ref filter (the controller
	// enqueues a reconcile). It must not block for long. Required.
	Trigger func(types.NamespacedName)
	// Log receives one line per request refused or handled at a known
	// path (the zero Logger discards); requests to unknown paths are
	// logged at V(1).
	Log logr.Logger
	// MaxBodyBytes limits the request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// ServeHTTP handles one webhook request. Everything it answers before
// authentication is the same for every path, known or not: 405 for a
// method other than POST, 413 for a body over the limit, and a 404 equal
// to http.NotFound's for an unknown path and for a request that does not
// authenticate. Nothing is read from the API before authentication.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, "method %s not allowed: use POST", r.Method)
		return
	}
	limit := h.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	if r.ContentLength > limit {
		reply(w, http.StatusRequestEntityTooLarge, "body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)
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

	e, ok := h.Index.lookup(r.URL.Path)
	if !ok {
		h.Log.V(1).Info("webhook refused: no receiver at this path", "path", r.URL.Path, "status", http.StatusNotFound)
		http.NotFound(w, r)
		return
	}
	key := e.key
	log := h.Log.WithValues("sync", key.String())
	p := detect(r.Header)
	if err := authenticate(p, r.Header, body, e.token); err != nil {
		log.Info("webhook refused: "+err.Error(), "provider", p.String(), "status", http.StatusNotFound)
		http.NotFound(w, r)
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

	s := &v1alpha1.Sync{}
	if err := h.Reader.Get(r.Context(), key, s); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("webhook refused: the Sync is gone", "status", http.StatusNotFound)
			http.NotFound(w, r)
			return
		}
		log.Error(fmt.Errorf("Sync %s: reading: %w", key, err), "webhook not handled", "status", http.StatusInternalServerError)
		reply(w, http.StatusInternalServerError, "receiver for %s cannot read its Sync: see the controller log", key)
		return
	}
	if s.Spec.Receiver == nil || !s.DeletionTimestamp.IsZero() {
		log.Info("webhook refused: the Sync has no receiver or is being deleted", "status", http.StatusNotFound)
		http.NotFound(w, r)
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

// reply writes a one-line text/plain answer.
func reply(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintf(w, format+"\n", args...)
}
