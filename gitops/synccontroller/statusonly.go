package synccontroller

import (
	"maps"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// generationTracked are the built-in kinds whose metadata.generation the
// API server moves on every change to their spec (apps/v1's registry
// strategies), so that an update keeping it changed only metadata or
// status. Custom resources need no entry: the API extensions server
// moves the generation of a custom resource on every change outside
// metadata and status (and on status too when the CRD has no status
// subresource).
var generationTracked = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "DaemonSet"}:   true,
	{Group: "apps", Kind: "StatefulSet"}: true,
}

// builtinGroup reports whether group is served by kube-apiserver itself
// (the core group, the unqualified groups apps, batch, policy and
// autoscaling, and *.k8s.io) rather than by a CRD. A CRD in a *.k8s.io
// group (snapshot.storage.k8s.io) counts as built-in: the answer errs on
// the safe side.
func builtinGroup(group string) bool {
	return !strings.Contains(group, ".") || group == "k8s.io" || strings.HasSuffix(group, ".k8s.io")
}

// statusOnly reports whether the update of an object of kind gk from old
// to cur changed nothing converge applies: its generation is set and
// unchanged (so its spec is, for a custom resource or a kind of
// generationTracked) and so are its labels, annotations, finalizers,
// owner references and deletion timestamp. Anything else, or a kind whose
// generation says nothing (ConfigMap, RBAC), is not status-only. Only a
// status-only change may be answered by a status refresh instead of an
// apply.
func statusOnly(gk schema.GroupKind, old, cur *metav1.PartialObjectMetadata) bool {
	if old == nil || cur == nil || (builtinGroup(gk.Group) && !generationTracked[gk]) {
		return false
	}
	if cur.Generation == 0 || cur.Generation != old.Generation {
		return false
	}
	return maps.Equal(old.Labels, cur.Labels) && maps.Equal(old.Annotations, cur.Annotations) &&
		reflect.DeepEqual(old.Finalizers, cur.Finalizers) && reflect.DeepEqual(old.OwnerReferences, cur.OwnerReferences) &&
		old.DeletionTimestamp.Equal(cur.DeletionTimestamp)
}
