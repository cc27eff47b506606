package datavolume

import (
	"fmt"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Clone phases and reasons. converge clones hostpath volumes as CDI's
// host-assisted clone (pkg/controller/datavolume/pvc-clone-controller.go,
// CDI's choice when no CSI clone or snapshot exists): the cdi-importer of
// the source volume's node copies its image into the new volume, so both
// must be on one node.
const (
	// ReasonCloneWithoutSource: the DataSource or the source PVC does not
	// exist (yet), or the DataSource names no source; CDI's
	// CloneWithoutSource.
	ReasonCloneWithoutSource = "CloneWithoutSource"
	// ReasonCloneSourceNotReady: the source PVC is not Bound, or its
	// DataVolume has not Succeeded (converge's; CDI waits the same way).
	ReasonCloneSourceNotReady = "CloneSourceNotReady"
	// ReasonCrossNodeClone: the new volume is bound on another node than
	// the source's, or the source is not a hostpath CSI volume (converge's).
	ReasonCrossNodeClone = "CrossNodeClone"
	// ReasonCloneUnauthorized: a clone from another namespace whose clone
	// token (api/uploadtoken AnnCloneToken, AnnExtendedCloneToken) is
	// missing, does not verify or names another clone (converge's; CDI's
	// controller returns "clone token missing" / "invalid token" as a
	// reconcile error).
	ReasonCloneUnauthorized = "CloneUnauthorized"
)

// IsClone reports whether dv clones a volume: spec.source.pvc or
// spec.sourceRef.
func IsClone(dv *cdiv1.DataVolume) bool {
	return dv.Spec.SourceRef != nil || (dv.Spec.Source != nil && dv.Spec.Source.PVC != nil)
}

// CheckClone gives the error of a clone source CDI's webhook refuses
// (validateSourceRef: kind DataSource, a name; validateDataVolumeSourcePVC:
// a name). A source in another namespace is accepted here: whether the
// creator may clone it is the DataVolume admission webhook's question
// (operators/cdi/dvadmission, CDI's datavolume-mutate), whose clone token
// the controller and the node agent check.
func CheckClone(dv *cdiv1.DataVolume) error {
	if r := dv.Spec.SourceRef; r != nil {
		switch {
		case r.Kind != cdiv1.DataVolumeDataSource:
			return fmt.Errorf("DataVolume %s/%s: spec.sourceRef.kind %q: expected %s", dv.Namespace, dv.Name, r.Kind, cdiv1.DataVolumeDataSource)
		case r.Name == "":
			return fmt.Errorf("DataVolume %s/%s: spec.sourceRef.name: empty; expected the name of a DataSource", dv.Namespace, dv.Name)
		}
		return nil
	}
	if dv.Spec.Source.PVC.Name == "" {
		return fmt.Errorf("DataVolume %s/%s: spec.source.pvc.name: empty; expected the name of the PVC to clone", dv.Namespace, dv.Name)
	}
	return nil
}
