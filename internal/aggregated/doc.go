// Package aggregated runs the aggregated API servers converge-controller
// serves for its roles, each as the upstream component serves its own:
// subresources.kubevirt.io/v1 (KubeVirt's virt-api, operators/virt/virtapi)
// and upload.cdi.kubevirt.io/v1beta1 (CDI's cdi-apiserver,
// operators/cdi/uploadapi).
//
// A Server is a k8s.io/apiserver generic API server: TLS with the webhook
// certificate converge-controller issues and rotates (internal/webhook),
// authentication and authorization delegated to the API server as every
// aggregated API server does (kube-apiserver proxies a caller's request
// with its front-proxy client certificate and the caller's identity in
// X-Remote-* headers, checked against
// kube-system/extension-apiserver-authentication; bearer tokens are
// reviewed with TokenReview; every request is authorized with a
// SubjectAccessReview, so RBAC decides). What it serves is an API's
// Install. An APIService (APIService, Register, Unregister) routes the
// group to it; Setup runs both inside a controller-runtime manager.
package aggregated
