// Package datavolume is the DataVolume contract between converge's
// DataVolume controller (operators/cdi/datavolume, the cdi-controller
// role in converge-controller) and the cdi-importer node agent
// (nodeplane/cdi/importcontroller and its upload server
// nodeplane/cdi/uploadserver, `converge-node cdi-importer`): the PVC
// annotations the controller writes and the agent reads (AnnSource,
// AnnEndpoint, AnnSelectedNode, AnnUploadRequest, ...), the sources both
// understand (SourceKind, IsUpload), the conditions and reasons both write
// (SetCondition, FindCondition, Reason...), who owns which phase (Owned),
// and the CRD both wait for (CRDName).
//
// The names and rules are CDI's (kubevirt/containerized-data-importer
// v1.62): pkg/controller/common/util.go for the annotations,
// pkg/controller/datavolume/conditions.go for the conditions and their
// reasons. The Node label that places imports is v1alpha1.ImporterNodeLabel
// (api/v1alpha1).
package datavolume

// CRDName is the DataVolume CRD (components/cdi/dv_crd.cue): the
// controller and the node agent wait for it to be established before they
// watch DataVolumes.
const CRDName = "datavolumes.cdi.kubevirt.io"
