package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/nodeplane/endpoint"
)

// Resource is what a console session is authorized as: verb get on
// virtualmachineinstances/console in API group subresources.kubevirt.io,
// KubeVirt's RBAC for `virtctl console` (kubevirt
// pkg/virt-operator/resource/generate/rbac/cluster.go).
var Resource = authzv1.ResourceAttributes{
	Verb:        "get",
	Group:       "subresources.kubevirt.io",
	Version:     "v1",
	Resource:    "virtualmachineinstances",
	Subresource: "console",
}

// refuse gives a refusal answered with code and the formatted message
// (endpoint.Refuse).
var refuse = endpoint.Refuse

// bearer gives the request's bearer token, or a 401.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", refuse(http.StatusUnauthorized, "console: no bearer token: send Authorization: Bearer <token> (a ServiceAccount or OIDC token the API server accepts)")
	}
	return strings.TrimSpace(token), nil
}

// authenticate checks token with a TokenReview and gives the user.
func authenticate(ctx context.Context, c client.Client, token string) (authnv1.UserInfo, error) {
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
	if err := c.Create(ctx, tr); err != nil {
		return authnv1.UserInfo{}, refuse(http.StatusInternalServerError, "console: TokenReview: %v", err)
	}
	if !tr.Status.Authenticated {
		msg := "the API server did not accept the bearer token"
		if tr.Status.Error != "" {
			msg += ": " + tr.Status.Error
		}
		return authnv1.UserInfo{}, refuse(http.StatusUnauthorized, "console: %s", msg)
	}
	return tr.Status.User, nil
}

// authorize checks with a SubjectAccessReview that user may get
// virtualmachineinstances/console of ns/name.
func authorize(ctx context.Context, c client.Client, user authnv1.UserInfo, ns, name string) error {
	attrs := Resource
	attrs.Namespace, attrs.Name = ns, name
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		ResourceAttributes: &attrs, User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra}}
	if err := c.Create(ctx, sar); err != nil {
		return refuse(http.StatusInternalServerError, "console: SubjectAccessReview: %v", err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		msg := fmt.Sprintf("User %q cannot %s resource \"%s/%s\" in API group %q in the namespace %q",
			user.Username, attrs.Verb, attrs.Resource, attrs.Subresource, attrs.Group, ns)
		if sar.Status.Reason != "" {
			msg += ": " + sar.Status.Reason
		}
		return refuse(http.StatusForbidden, "console: %s", msg)
	}
	return nil
}
