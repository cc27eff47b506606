package reconciler

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// operatorVersion is reported in status.versions[operator].
const operatorVersion = "1.20.0"

func schemaGVK(g metav1.GroupVersionKind) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind}
}

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }
