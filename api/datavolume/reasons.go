package datavolume

// Condition reasons of the Bound, Running and Ready conditions, CDI's
// where CDI has one (pkg/controller/datavolume/conditions.go and
// pkg/controller/common in kubevirt/containerized-data-importer).
const (
	// ReasonBound and ReasonPending are the Bound condition's reasons
	// for a Bound / Pending PVC.
	ReasonBound   = "Bound"
	ReasonPending = "Pending"
	// ReasonClaimLost: the PVC lost its PV.
	ReasonClaimLost = "ClaimLost"
	// ReasonNotFound: the PVC does not exist (yet).
	ReasonNotFound = "NotFound"
	// ReasonTransferRunning is Ready=False while the import runs.
	ReasonTransferRunning = "TransferRunning"
	// ReasonCompleted is Running=False and Ready=True after a successful
	// import (CDI's importer pod terminates with reason Completed).
	ReasonCompleted = "Completed"
	// ReasonNoImporterNode: WaitForFirstConsumer storage and no Ready Node
	// labelled v1alpha1.ImporterNodeLabel=true.
	ReasonNoImporterNode = "NoImporterNode"
	// ReasonUnsupportedSource: a source SourceKind refuses (one converge
	// does not import, a malformed registry source), or none.
	ReasonUnsupportedSource = "UnsupportedSource"
	// ReasonInvalidSpec: no size, or neither spec.pvc nor spec.storage.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonClaimNotOwned: a PVC with the DataVolume's name exists and is
	// not controlled by it.
	ReasonClaimNotOwned = "ClaimNotOwned"
)
