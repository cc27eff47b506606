// Package dvadmission is converge's DataVolume mutating admission webhook,
// CDI's datavolume-mutate.cdi.kubevirt.io (pkg/apiserver/webhooks
// datavolume-mutate.go, served by cdi-apiserver): on the CREATE of a
// DataVolume that clones (spec.source.pvc, or spec.sourceRef to a
// DataSource whose source is a PVC) it asks the API server, with
// SubjectAccessReviews for the requesting user (cdiv1
// DataVolume.AuthorizeUser: create on datavolumes/source, or on pods, in
// the source namespace, when it differs from the DataVolume's), whether
// the requester may clone the source. A requester who may not is refused
// with CDI's message ("User <name> has insufficient permissions in clone
// source namespace <ns>"); otherwise the webhook stamps the clone token
// (api/uploadtoken AnnCloneToken, operators/cdi/clonetoken) that the
// DataVolume controller and the node agent check before copying.
//
// converge-controller serves it on its webhook server and registers the
// MutatingWebhookConfiguration ConfigurationName once the DataVolume CRD
// exists and a native CDI runs (the cdi-apiserver role).
package dvadmission
