package dvadmission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/cdi/cloneauth"
	"github.com/converge-dev/converge/operators/cdi/clonetoken"
)

// Names and path of the webhook, CDI's (cdi-apiserver registers
// datavolume-mutate.cdi.kubevirt.io on /datavolume-mutate in the
// MutatingWebhookConfiguration cdi-api-datavolume-mutate).
const (
	// ConfigurationName is the MutatingWebhookConfiguration's name.
	ConfigurationName = "cdi-api-datavolume-mutate"
	// WebhookName is the webhook's name.
	WebhookName = "datavolume-mutate.cdi.kubevirt.io"
	// Path is the server path the webhook calls.
	Path = "/datavolume-mutate"
)

// Mutator is the admission handler.
type Mutator struct {
	// Client creates the SubjectAccessReviews.
	Client client.Client
	// Reader reads Namespaces and DataSources, uncached.
	Reader client.Reader
	// Tokens issues the clone tokens.
	Tokens *clonetoken.Tokens
}

var _ ctrladmission.Handler = Mutator{}

// Handle takes an AdmissionReview request for a cdi.kubevirt.io
// DataVolume and gives, as CDI's dataVolumeMutatingWebhook.Admit:
//   - allowed unchanged for an operation other than CREATE, and for a
//     DataVolume that does not clone a PVC (cdiv1.ErrNoTokenOkay);
//   - allowed unchanged for a spec.sourceRef whose DataSource does not
//     exist yet in the DataVolume's own namespace (a same-namespace clone
//     needs no authorization; the controller waits for the DataSource);
//   - denied, code 422 and CDI's message, with the cause on
//     spec.source.PVC.namespace, when the requesting user may not clone
//     the source (AuthorizeUser);
//   - otherwise allowed with the annotation AnnCloneToken set to a token
//     naming the source PVC and the target (clonetoken.Lifetime), any
//     value the request carried there replaced;
//   - an error naming the DataVolume when its JSON does not decode or the
//     API server cannot answer (a missing DataSource in another namespace
//     is such an error: 400, naming it).
func (m Mutator) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	if req.Operation != admissionv1.Create {
		return ctrladmission.Allowed("")
	}
	dv := &cdiv1.DataVolume{}
	name := webhook.RequestName(req)
	what := "DataVolume " + req.Namespace + "/" + name
	if err := json.Unmarshal(req.Object.Raw, dv); err != nil {
		return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", what, err))
	}
	targetNS, targetName := dv.Namespace, dv.Name
	if targetNS == "" {
		targetNS = req.Namespace
	}
	if targetName == "" {
		targetName = name
	}
	proxy := cloneauth.Proxy{Ctx: ctx, Client: m.Client, Reader: m.Reader}
	resp, err := dv.AuthorizeUser(req.Namespace, name, proxy, req.UserInfo)
	switch {
	case errors.Is(err, cdiv1.ErrNoTokenOkay):
		return ctrladmission.Allowed("not a clone")
	case apierrors.IsNotFound(err) && dv.Spec.SourceRef != nil && sourceRefNamespace(dv, targetNS) == targetNS:
		return ctrladmission.Allowed("DataSource not found yet; a clone within the namespace needs no token")
	case apierrors.IsNotFound(err) && dv.Spec.SourceRef != nil:
		return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: spec.sourceRef: DataSource %s/%s: %w (a clone from another namespace is authorized when the DataVolume is created, so its DataSource must exist)",
			what, sourceRefNamespace(dv, targetNS), dv.Spec.SourceRef.Name, err))
	case err != nil:
		return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: authorizing the clone: %w", what, err))
	case !resp.Allowed:
		return Rejected([]metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: resp.Reason, Field: "spec.source.PVC.namespace"}})
	}
	if resp.Handler.TokenResource.Resource != tokenapi.PVCResource.Resource {
		// a snapshot source: converge has none to clone; the controller
		// refuses it with its own message
		return ctrladmission.Allowed("")
	}
	srcNS := resp.Handler.SourceNamespace
	if srcNS == "" {
		srcNS = targetNS
	}
	tok, err := m.Tokens.Issue(ctx, clonetoken.Clone{SourceNamespace: srcNS, SourceName: resp.Handler.SourceName, TargetNamespace: targetNS, TargetName: targetName}, clonetoken.Lifetime)
	if err != nil {
		return ctrladmission.Errored(http.StatusInternalServerError, fmt.Errorf("%s: %w", what, err))
	}
	out := dv.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[tokenapi.AnnCloneToken] = tok
	delete(out.Annotations, tokenapi.AnnExtendedCloneToken)
	raw, err := json.Marshal(out)
	if err != nil {
		return ctrladmission.Errored(http.StatusInternalServerError, fmt.Errorf("%s: %w", what, err))
	}
	return ctrladmission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// Rejected gives CDI's rejection (toRejectedAdmissionResponse): denied,
// code 422, the causes' messages joined each after a space, and the
// causes in the details.
func Rejected(causes []metav1.StatusCause) ctrladmission.Response {
	msg := ""
	for _, c := range causes {
		msg = fmt.Sprintf("%s %s", msg, c.Message)
	}
	return ctrladmission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false,
		Result: &metav1.Status{Status: metav1.StatusFailure, Message: msg, Reason: metav1.StatusReasonInvalid, Code: http.StatusUnprocessableEntity,
			Details: &metav1.StatusDetails{Causes: causes}}}}
}

func sourceRefNamespace(dv *cdiv1.DataVolume, def string) string {
	if ns := dv.Spec.SourceRef.Namespace; ns != nil && *ns != "" {
		return *ns
	}
	return def
}

// Webhook gives the MutatingWebhookConfiguration ConfigurationName: one
// webhook, WebhookName, on DataVolumes (cdi.kubevirt.io, every version
// through matchPolicy Equivalent) served by m at Path; sideEffects
// NoneOnDryRun (the signing key is created on first use), registered once
// the DataVolume CRD exists and ready returns (the cdi-apiserver role's
// gate).
func Webhook(m Mutator, ready func(ctx context.Context) error) webhook.Configuration {
	return webhook.Configuration{
		Name:    ConfigurationName,
		What:    "the DataVolume admission webhook",
		LogName: "dvadmission",
		Mutating: []webhook.MutatingHook{{Name: WebhookName, Path: Path, Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes",
			MatchPolicy: admissionregistrationv1.Equivalent, SideEffects: admissionregistrationv1.SideEffectClassNoneOnDryRun}},
		Handlers: []webhook.Handler{{Path: Path, Handler: &ctrlwebhook.Admission{Handler: m}}},
		CRDs:     []string{dvapi.CRDName},
		Ready:    ready,
	}
}
