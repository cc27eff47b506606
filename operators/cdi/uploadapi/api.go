package uploadapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	uploadv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/aggregated"
)

// GroupVersion is the API served, CDI's upload.cdi.kubevirt.io/v1beta1.
var GroupVersion = schema.GroupVersion{Group: "upload.cdi.kubevirt.io", Version: "v1beta1"}

// APIServiceName is the APIService of the API, named as cdi-operator names
// CDI's.
const APIServiceName = "v1beta1.upload.cdi.kubevirt.io"

// Options configure the API.
type Options struct {
	// Key gives the signing key (uploadtoken.EnsureKeys); called per
	// request, it may cache. Required.
	Key func(ctx context.Context) (*ecdsa.PrivateKey, error)
	// Lifetime is how long a token is valid from its issue (CDI's 5
	// minutes when zero).
	Lifetime time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// API gives the aggregated API of upload.cdi.kubevirt.io/v1beta1 with o,
// with the priorities cdi-operator gives CDI's APIService
// (pkg/operator/resources/cluster/apiserver.go: groupPriorityMinimum 1000,
// versionPriority 15).
func API(o Options) aggregated.API {
	if o.Lifetime <= 0 {
		o.Lifetime = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &handler{o: o}
	return aggregated.API{GroupVersion: GroupVersion, Install: h.install,
		GroupPriorityMinimum: 1000, VersionPriority: 15, Component: "cdi-apiserver"}
}

type handler struct{ o Options }

// resource is the API's one resource, as CDI's apiserver lists it.
var resource = metav1.APIResource{Name: "uploadtokenrequests", SingularName: "uploadtokenrequest", Namespaced: true,
	Kind: "UploadTokenRequest", Verbs: metav1.Verbs{"create"}, ShortNames: []string{"utr", "utrs"}}

// install serves discovery (plain and aggregated) and the create.
func (h *handler) install(gs *genericapiserver.GenericAPIServer) {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: GroupVersion.String(), Version: GroupVersion.Version}
	group := metav1.APIGroup{Name: GroupVersion.Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
	gs.DiscoveryGroupManager.AddGroup(group)
	gs.AggregatedDiscoveryGroupManager.AddGroupVersion(GroupVersion.Group, apidiscoveryv2.APIVersionDiscovery{
		Version: GroupVersion.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		Resources: []apidiscoveryv2.APIResourceDiscovery{{Resource: resource.Name, SingularResource: resource.SingularName,
			Scope: apidiscoveryv2.ScopeNamespace, Verbs: resource.Verbs, ShortNames: resource.ShortNames,
			ResponseKind: &metav1.GroupVersionKind{Group: GroupVersion.Group, Version: GroupVersion.Version, Kind: resource.Kind}}}})
	prefix := "/apis/" + GroupVersion.Group
	gs.Handler.NonGoRestfulMux.Handle(prefix, discovery.NewAPIGroupHandler(aggregated.Codecs, group))
	gs.Handler.NonGoRestfulMux.Handle(prefix+"/"+GroupVersion.Version, discovery.NewAPIVersionHandler(aggregated.Codecs, GroupVersion,
		discovery.APIResourceListerFunc(func() []metav1.APIResource { return []metav1.APIResource{resource} })))
	gs.Handler.NonGoRestfulMux.HandlePrefix(prefix+"/"+GroupVersion.Version+"/", http.HandlerFunc(h.serve))
}

// serve answers an authenticated, authorized request below
// /apis/upload.cdi.kubevirt.io/v1beta1/: POST on the collection
// uploadtokenrequests of a namespace creates a token; anything else is 404
// (405 for another verb on the collection).
func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	info, ok := request.RequestInfoFrom(r.Context())
	gr := GroupVersion.WithResource(resource.Name).GroupResource()
	if !ok || !info.IsResourceRequest || info.Resource != resource.Name || info.Namespace == "" || info.Name != "" || info.Subresource != "" {
		writeError(w, r, apierrors.NewNotFound(gr, info.Name))
		return
	}
	if info.Verb != "create" {
		writeError(w, r, apierrors.NewMethodNotSupported(gr, info.Verb))
		return
	}
	utr, err := decode(r.Body)
	if err != nil {
		writeError(w, r, apierrors.NewBadRequest(err.Error()))
		return
	}
	key, err := h.o.Key(r.Context())
	if err != nil {
		writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("upload token signing key: %v", err)))
		return
	}
	now := h.o.Now()
	tok, err := tokenapi.Sign(key, tokenapi.Claims{Operation: tokenapi.OperationUpload, Name: utr.Spec.PvcName,
		Namespace: info.Namespace, Resource: tokenapi.PVCResource, IssuedAt: now, Expiry: now.Add(h.o.Lifetime)})
	if err != nil {
		writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	utr.APIVersion, utr.Kind = GroupVersion.String(), resource.Kind
	utr.Namespace = info.Namespace
	if utr.CreationTimestamp.IsZero() {
		utr.CreationTimestamp = metav1.NewTime(now)
	}
	utr.Status.Token = tok
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK) // as CDI (WriteAsJson)
	_ = json.NewEncoder(w).Encode(utr)
}

// decode reads an UploadTokenRequest (at most 64 KiB of JSON) whose
// spec.pvcName is set.
func decode(body io.Reader) (*uploadv1.UploadTokenRequest, error) {
	b, err := io.ReadAll(io.LimitReader(body, 64<<10))
	if err != nil {
		return nil, err
	}
	utr := &uploadv1.UploadTokenRequest{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(utr); err != nil {
		return nil, fmt.Errorf("expected an UploadTokenRequest (upload.cdi.kubevirt.io/v1beta1): %v", err)
	}
	if utr.Kind != "" && utr.Kind != resource.Kind {
		return nil, fmt.Errorf("kind %q: expected UploadTokenRequest", utr.Kind)
	}
	if utr.Spec.PvcName == "" {
		return nil, errors.New("spec.pvcName: required (the PVC, i.e. the upload DataVolume, to upload into)")
	}
	return utr, nil
}

// writeError answers with err as a metav1.Status.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	responsewriters.ErrorNegotiated(err, aggregated.Codecs, GroupVersion, w, r)
}
