// Package virtapi is converge's virt-api for users: the aggregated API
// subresources.kubevirt.io/v1 that KubeVirt's virt-api serves (kubevirt
// pkg/virt-api/api.go, pkg/virt-api/rest), which `virtctl`, KubeVirt's Go
// client (kubevirt.io/client-go) and `converge vm` call, served by
// converge-controller while a native KubeVirt exists.
//
// The server is an internal/aggregated Server: TLS with the webhook
// certificate converge-controller issues and rotates (internal/webhook),
// authentication and authorization delegated to the API server as every
// aggregated API server (and KubeVirt's virt-api) does: kube-apiserver
// proxies a caller's request with its front-proxy client certificate and
// the caller's identity in X-Remote-* headers, checked against
// kube-system/extension-apiserver-authentication; bearer tokens are
// reviewed with TokenReview, and every request is authorized with a
// SubjectAccessReview, so RBAC decides (KubeVirt's kubevirt.io:admin,
// kubevirt.io:edit, kubevirt.io:view roles, rendered by components/virt).
// It serves, in KubeVirt's words and status codes:
//
//   - PUT virtualmachines/{start,stop,restart} with StartOptions,
//     StopOptions (gracePeriod), RestartOptions (gracePeriodSeconds 0) as
//     bodies (lifecycle.go): the changes and refusals of
//     operators/virt/virtcontroller/vmstate (Start, Stop, Restart), which
//     the VM controller (operators/virt/virtcontroller/vm) then carries
//     out, answered 202 Accepted;
//   - GET virtualmachineinstances/console with a WebSocket upgrade,
//     subprotocol plain.kubevirt.io (console.go): a stream to the serial
//     console server of the VMI's node (nodeplane/vm/console, reached with
//     internal/nodeclient and converge-controller's own token), as
//     virt-api streams to virt-handler;
//   - GET virtualmachineinstances/vnc: refused as KubeVirt refuses a VMI
//     without a graphics device (converge's domains are headless);
//     guestosinfo, userlist and filesystemlist: refused as KubeVirt refuses
//     a VMI whose guest agent is not connected (converge runs none).
//
// Setup registers the APIService v1.subresources.kubevirt.io (named as
// KubeVirt's) pointing at converge-controller's Service, with the
// certificate's CA bundle, on the leader once the server serves; the
// certificate Manager re-injects the bundle when it rotates.
package virtapi
