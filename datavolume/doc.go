// Package datavolume is converge's cdi-controller role for DataVolumes
// (cdi.kubevirt.io/v1beta1, the CRD of components/cdi/dv_crd.cue): it turns
// each DataVolume into its PersistentVolumeClaim and reports the phases up
// to ImportScheduled; the cdi-importer node agent (nodeplane/cdiimport)
// fills the volume and writes ImportInProgress, progress, restartCount and
// Succeeded or Failed.
//
// It follows kubevirt/containerized-data-importer (CDI) v1.62:
// pkg/controller/datavolume/import-controller.go (the PVC is named like the
// DataVolume, controller-owned by it, annotated with
// cdi.kubevirt.io/storage.import.source/endpoint/certConfigMap/secretName
// and cdi.kubevirt.io/storage.contentType), conditions.go (the Bound,
// Ready and Running conditions and their reasons), and util.go
// (spec.storage defaults: ReadWriteOnce, Filesystem).
//
// Node selection for WaitForFirstConsumer storage follows CDI with the
// HonorWaitForFirstConsumer feature gate off: CDI then schedules its
// importer pod, the scheduler picks a node and sets
// volume.kubernetes.io/selected-node on the PVC. converge has no importer
// pod, so the controller picks the node itself among the Ready Nodes
// labelled ImporterNodeLabel=true (the label the cdi-importer agent puts
// on its Node), the one with the fewest DataVolumes already placed, and
// sets the annotation so the provisioner provisions the volume there.
//
// Phase ownership. The controller writes Pending, WaitForFirstConsumer and
// ImportScheduled, claimName and the Bound condition; it never moves a
// DataVolume out of ImportInProgress, Succeeded or Failed, which belong to
// the node agent (see Owned).
package datavolume
