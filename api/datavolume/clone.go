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
)

// IsClone reports whether dv clones a volume: spec.source.pvc or
// spec.sourceRef.
func IsClone(dv *cdiv1.DataVolume) bool {
	return dv.Spec.SourceRef != nil || (dv.Spec.Source != nil && dv.Spec.Source.PVC != nil)
}

// CheckClone gives the error of a clone source CDI's webhook refuses
// (validateSourceRef: kind DataSource, a name; validateDataVolumeSourcePVC:
// a name), or converge: a source in another namespace than dv's.
// CDI authorizes such a clone in its webhook (the creator must be allowed
// to create datavolumes/source in the source namespace,
// pkg/apiserver/webhooks/datavolume-validate.go); converge has no
// DataVolume webhook to check it, so it refuses cross-namespace clones.
func CheckClone(dv *cdiv1.DataVolume) error {
	ns := func(n *string) string {
		if n == nil || *n == "" {
			return dv.Namespace
		}
		return *n
	}
	if r := dv.Spec.SourceRef; r != nil {
		switch {
		case r.Kind != cdiv1.DataVolumeDataSource:
			return fmt.Errorf("DataVolume %s/%s: spec.sourceRef.kind %q: expected %s", dv.Namespace, dv.Name, r.Kind, cdiv1.DataVolumeDataSource)
		case r.Name == "":
			return fmt.Errorf("DataVolume %s/%s: spec.sourceRef.name: empty; expected the name of a DataSource", dv.Namespace, dv.Name)
		case ns(r.Namespace) != dv.Namespace:
			return crossNamespace(dv, "spec.sourceRef.namespace", ns(r.Namespace))
		}
		return nil
	}
	p := dv.Spec.Source.PVC
	switch {
	case p.Name == "":
		return fmt.Errorf("DataVolume %s/%s: spec.source.pvc.name: empty; expected the name of the PVC to clone", dv.Namespace, dv.Name)
	case p.Namespace != "" && p.Namespace != dv.Namespace:
		return crossNamespace(dv, "spec.source.pvc.namespace", p.Namespace)
	}
	return nil
}

func crossNamespace(dv *cdiv1.DataVolume, field, ns string) error {
	return fmt.Errorf("DataVolume %s/%s: %s %q: converge clones within the DataVolume's namespace only (CDI's webhook authorizes a cross-namespace clone, create datavolumes/source in %s; converge has no such check)", dv.Namespace, dv.Name, field, ns, ns)
}
