package uploadproxy

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/api/uploadtoken"
)

// CDI's uploadproxy paths (containerized-data-importer pkg/common).
const (
	PathUpload          = nodeendpoint.UploadPath
	PathUploadAsync     = nodeendpoint.UploadAsyncPath
	PathUploadForm      = "/v1beta1/upload-form"
	PathUploadFormAsync = "/v1beta1/upload-form-async"
	PathHealthz         = "/healthz"
)

// Options configure a Proxy.
type Options struct {
	// Reader reads PVCs, PersistentVolumes and Nodes. Required.
	Reader client.Reader
	// PublicKeys gives the keys upload tokens are verified with (the
	// issuer's published keys, uploadtoken.PublicKeys). Required.
	PublicKeys func(ctx context.Context) ([]*ecdsa.PublicKey, error)
	// Now is the clock tokens expire by; nil: time.Now.
	Now func() time.Time
	// Log receives a line per upload routed or refused; zero: discarded.
	Log logr.Logger
}

// Proxy is the http.Handler of the upload proxy.
type Proxy struct{ o Options }

// New checks o and gives a Proxy.
func New(o Options) (*Proxy, error) {
	if o.Reader == nil || o.PublicKeys == nil {
		return nil, fmt.Errorf("uploadproxy: Options.Reader and PublicKeys are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Proxy{o: o}, nil
}

// authHeader is CDI's uploadproxy authHeaderMatcher.
var authHeader = regexp.MustCompile(`(?i)^Bearer\s+([A-Za-z0-9\-\._~\+\/]+)$`)

// ServeHTTP answers GET /healthz with 200 and routes the uploads (see the
// package doc); HEAD on an upload path answers 200 once the token and the
// route check out (virtctl probes upload-async so), without a body; other
// paths are 404, other methods 405.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	nodePath, form := "", false
	switch r.URL.Path {
	case PathHealthz:
		w.WriteHeader(http.StatusOK)
		return
	case PathUpload:
		nodePath = nodeendpoint.UploadPath
	case PathUploadAsync:
		nodePath = nodeendpoint.UploadAsyncPath
	case PathUploadForm:
		nodePath, form = nodeendpoint.UploadPath, true
	case PathUploadFormAsync:
		nodePath, form = nodeendpoint.UploadAsyncPath, true
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost && r.Method != http.MethodPut && r.Method != http.MethodHead {
		w.Header().Set("Allow", "POST, PUT, HEAD")
		http.Error(w, fmt.Sprintf("%s %s: expected POST", r.Method, r.URL.Path), http.StatusMethodNotAllowed)
		return
	}
	m := authHeader.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		p.refuse(w, r, http.StatusBadRequest, "expected header Authorization: Bearer <upload token> (from an UploadTokenRequest)")
		return
	}
	keys, err := p.o.PublicKeys(r.Context())
	if err != nil {
		p.refuse(w, r, http.StatusServiceUnavailable, "cannot verify upload tokens yet: "+err.Error())
		return
	}
	c, err := uploadtoken.Verify(m[1], keys, p.o.Now())
	if err != nil {
		p.refuse(w, r, http.StatusUnauthorized, "upload token refused: "+err.Error())
		return
	}
	if c.Operation != uploadtoken.OperationUpload || c.Name == "" || c.Namespace == "" || c.Resource != uploadtoken.PVCResource {
		p.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("upload token for %s/%s: operation %q on %q, expected %q on persistentvolumeclaims",
			c.Namespace, c.Name, c.Operation, c.Resource.Resource, uploadtoken.OperationUpload))
		return
	}
	ep, err := endpointOf(r.Context(), p.o.Reader, c.Namespace, c.Name)
	if err != nil {
		p.refuse(w, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	if r.Method == http.MethodHead {
		// virtctl asks with HEAD whether the path (upload-async) is
		// served before it uploads: yes, for this token and volume
		w.WriteHeader(http.StatusOK)
		return
	}
	body, size := io.Reader(r.Body), r.ContentLength
	if form {
		part, err := filePart(r)
		if err != nil {
			p.refuse(w, r, http.StatusBadRequest, err.Error())
			return
		}
		body, size = part, -1
	}
	p.forward(w, r, ep, nodePath, m[1], body, size, c.Namespace+"/"+c.Name)
}

// refuse answers code with msg as one line of text; nothing was read from
// the body nor sent anywhere.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	p.o.Log.Info("upload refused", "code", code, "reason", msg, "remote", r.RemoteAddr)
	http.Error(w, msg, code)
}

// filePart gives the reader of the form's "file" part, as CDI's upload
// server reads a form upload (the first part named "file"); 400 for a body
// that is not multipart or has none.
func filePart(r *http.Request) (io.Reader, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, fmt.Errorf("form upload: expected Content-Type multipart/form-data with a boundary")
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, fmt.Errorf("form upload: no part named \"file\"")
		}
		if err != nil {
			return nil, fmt.Errorf("form upload: %w", err)
		}
		if part.FormName() == "file" {
			return part, nil
		}
	}
}
