package snapshotcrds

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
)

// TestCRDs: the pinned files decode to the three v1 CRDs of the group,
// served and stored as v1, with the kinds of the client/v8 types.
func TestCRDs(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"VolumeSnapshotClass", "VolumeSnapshotContent", "VolumeSnapshot"}
	if len(crds) != len(want) {
		t.Fatalf("%d CRDs, want %d", len(crds), len(want))
	}
	for i, crd := range crds {
		if crd.Spec.Group != snapv1.GroupName || crd.Spec.Names.Kind != want[i] {
			t.Errorf("CRD %d = %s %s, want %s %s", i, crd.Spec.Group, crd.Spec.Names.Kind, snapv1.GroupName, want[i])
		}
		stored := ""
		for _, v := range crd.Spec.Versions {
			if v.Storage && v.Served {
				stored = v.Name
			}
		}
		if stored != snapv1.SchemeGroupVersion.Version {
			t.Errorf("CRD %s stores %q, want v1", crd.Name, stored)
		}
	}
}
