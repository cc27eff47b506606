package datavolume

// PVC annotations, with CDI's names where CDI has one
// (pkg/controller/common/util.go in kubevirt/containerized-data-importer).
// The node label that places imports is v1alpha1.ImporterNodeLabel.
const (
	// AnnSource is the import source on the PVC: SourceHTTP,
	// SourceRegistry, SourceNone (blank) or SourceUpload, CDI's AnnSource.
	AnnSource = "cdi.kubevirt.io/storage.import.source"
	// AnnEndpoint is the URL of an http or registry source, CDI's
	// AnnEndpoint.
	AnnEndpoint = "cdi.kubevirt.io/storage.import.endpoint"
	// AnnSecret names the Secret of an http or registry source's
	// credentials, CDI's AnnSecret.
	AnnSecret = "cdi.kubevirt.io/storage.import.secretName"
	// AnnCertConfigMap names the ConfigMap of CAs for https, CDI's
	// AnnCertConfigMap.
	AnnCertConfigMap = "cdi.kubevirt.io/storage.import.certConfigMap"
	// AnnContentType is "kubevirt" or "archive", CDI's AnnContentType.
	AnnContentType = "cdi.kubevirt.io/storage.contentType"
	// AnnSelectedNode is the node the PVC is provisioned on for
	// WaitForFirstConsumer storage (set by the scheduler in Kubernetes, by
	// the DataVolume controller here).
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnUploadRequest marks, with value "", the PVC of a DataVolume with
	// spec.source.upload: the upload target, CDI's AnnUploadRequest
	// (the upload controller; CDI's cdi-uploadproxy only accepts PVCs
	// carrying it).
	AnnUploadRequest = "cdi.kubevirt.io/storage.upload.target"
	// AnnPodReady is "true" while the PVC's upload server takes data (the
	// DataVolume is UploadReady), else "false", CDI's AnnPodReady, which
	// virtctl image-upload --pvc waits for.
	AnnPodReady = "cdi.kubevirt.io/storage.pod.ready"
	// AnnPodPhase is the phase of the PVC's importer or upload server as a
	// pod phase (Pending, Running, Succeeded, Failed), CDI's AnnPodPhase,
	// which virtctl image-upload waits for to become Succeeded.
	AnnPodPhase = "cdi.kubevirt.io/storage.pod.phase"
	// AnnCreatedForDataVolume is CDI's marker naming the DataVolume UID a
	// PVC was created for.
	AnnCreatedForDataVolume = "cdi.kubevirt.io/createdForDataVolume"

	// AnnRegistryImportMethod is a registry source's pullMethod, CDI's
	// AnnRegistryImportMethod.
	AnnRegistryImportMethod = "cdi.kubevirt.io/storage.import.registryImportMethod"

	// AnnCloneRequest, on the PVC of a clone, names the source PVC as
	// "namespace/name", CDI's AnnCloneRequest; such a PVC has no
	// AnnSource.
	AnnCloneRequest = "k8s.io/CloneRequest"

	// SourceHTTP, SourceRegistry, SourceNone and SourceUpload are
	// AnnSource values (SourceKind), CDI's.
	SourceHTTP     = "http"
	SourceRegistry = "registry"
	SourceNone     = "none"
	SourceUpload   = "upload"
	// SourcePVC (spec.source.pvc) and SourceRef (spec.sourceRef) are
	// SourceKind's clones: no AnnSource, AnnCloneRequest instead.
	SourcePVC = "pvc"
	SourceRef = "sourceRef"
)
