// Package clonetoken issues and checks the clone tokens that authorize a
// DataVolume to clone a PVC of another namespace, as CDI's cdi-apiserver
// and cdi-controller do (pkg/token, pkg/apiserver/webhooks
// datavolume-mutate.go, pkg/controller/datavolume
// clone-controller-base.go): the DataVolume admission webhook
// (operators/cdi/dvadmission) stamps a short-lived token
// (api/uploadtoken AnnCloneToken) once a SubjectAccessReview allowed the
// requester, the DataVolume controller checks it and replaces it by an
// extended token bound to the DataVolume's UID (AnnExtendedCloneToken),
// and the node agent that copies the volume checks the extended token
// again (nodeplane/cdi/importcontroller).
//
// Tokens are signed with the cdi-apiserver role's key that also signs
// upload tokens (operators/cdi/uploadtoken: one key pair, as CDI's
// apiserver signs both kinds with its cdi-api-signing-key), in the format
// of api/uploadtoken (operation "Clone", CDI's payload params).
package clonetoken
