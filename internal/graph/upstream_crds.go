package graph

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/internal/snapshotcrds"
)

// upstreamCRDs gives the CRDs the graph applies as upstream ships them
// rather than generated from CUE: the snapshot.storage.k8s.io v1 CRDs
// (VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshot) of
// external-snapshotter client/v8.4.0, pinned in internal/snapshotcrds,
// which the snapshot controller (operators/hostpath/snapshotcontroller)
// and the node's csi-snapshotter (nodeplane/csi/snapshotter) serve. Each
// is named by its plural, as the generated ones are, and ready to apply
// (no status, no creationTimestamp).
func upstreamCRDs() ([]*CRD, error) {
	crds, err := snapshotcrds.CRDs()
	if err != nil {
		return nil, err
	}
	out := make([]*CRD, 0, len(crds))
	for _, crd := range crds {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		out = append(out, &CRD{Name: crd.Spec.Names.Plural, Object: u})
	}
	return out, nil
}
