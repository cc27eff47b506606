package datavolume

// Annotations and labels, with CDI's names where CDI has one
// (pkg/controller/common/util.go in kubevirt/containerized-data-importer).
const (
	// AnnSource is the import source on the PVC: SourceHTTP, SourceNone
	// (blank) or SourceUpload, CDI's AnnSource.
	AnnSource = "cdi.kubevirt.io/storage.import.source"
	// AnnEndpoint is the http(s) URL of an http source, CDI's AnnEndpoint.
	AnnEndpoint = "cdi.kubevirt.io/storage.import.endpoint"
	// AnnSecret names the Secret of an http source's credentials, CDI's
	// AnnSecret.
	AnnSecret = "cdi.kubevirt.io/storage.import.secretName"
	// AnnCertConfigMap names the ConfigMap of CAs for https, CDI's
	// AnnCertConfigMap.
	AnnCertConfigMap = "cdi.kubevirt.io/storage.import.certConfigMap"
	// AnnContentType is "kubevirt" or "archive", CDI's AnnContentType.
	AnnContentType = "cdi.kubevirt.io/storage.contentType"
	// AnnSelectedNode is the node the PVC is provisioned on for
	// WaitForFirstConsumer storage (set by the scheduler in Kubernetes, by
	// this controller here).
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnUploadRequest marks, with value "", the PVC of a DataVolume with
	// spec.source.upload: the upload target, CDI's AnnUploadRequest
	// (the upload controller; CDI's cdi-uploadproxy only accepts PVCs
	// carrying it).
	AnnUploadRequest = "cdi.kubevirt.io/storage.upload.target"
	// AnnCreatedForDataVolume is CDI's marker naming the DataVolume UID a
	// PVC was created for.
	AnnCreatedForDataVolume = "cdi.kubevirt.io/createdForDataVolume"

	// SourceHTTP, SourceNone and SourceUpload are AnnSource values
	// (SourceKind).
	SourceHTTP   = "http"
	SourceNone   = "none"
	SourceUpload = "upload"

	// ImporterNodeLabel marks, with value "true", the Nodes where a
	// cdi-importer agent runs (set by nodeplane/cdiimport); only they are
	// chosen for WaitForFirstConsumer imports and uploads (the agent
	// runs the upload server too).
	ImporterNodeLabel = "converge.dev/cdi-importer"
)

// Condition reasons, CDI's where CDI has one (conditions.go, common).
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
	// labelled ImporterNodeLabel=true.
	ReasonNoImporterNode = "NoImporterNode"
	// ReasonUnsupportedSource: a source other than http, blank or upload,
	// or none.
	ReasonUnsupportedSource = "UnsupportedSource"
	// ReasonInvalidSpec: no size, or neither spec.pvc nor spec.storage.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonClaimNotOwned: a PVC with the DataVolume's name exists and is
	// not controlled by it.
	ReasonClaimNotOwned = "ClaimNotOwned"
)
