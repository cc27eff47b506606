// Package datavolume is converge's DataVolume controller, the cdi-controller
// role for DataVolumes (cdi.kubevirt.io/v1beta1, the CRD of
// components/cdi/dv_crd.cue): it turns each DataVolume into its
// PersistentVolumeClaim and reports the phases up to ImportScheduled
// (UploadScheduled for spec.source.upload); the cdi-importer node agent
// (nodeplane/cdi/importcontroller) fills the volume and writes
// ImportInProgress, progress, restartCount and Succeeded or Failed, and its
// upload server (nodeplane/cdi/uploadserver) writes UploadReady once the
// PVC is Bound on its node, then Succeeded or Failed after the upload. The
// annotations, conditions and phase ownership both sides follow are
// api/datavolume.
//
// It follows kubevirt/containerized-data-importer (CDI) v1.62:
// pkg/controller/datavolume/import-controller.go (the PVC is named like the
// DataVolume, controller-owned by it, annotated with
// cdi.kubevirt.io/storage.import.source/endpoint/certConfigMap/secretName
// and cdi.kubevirt.io/storage.contentType), upload-controller.go (the PVC
// of spec.source.upload carries cdi.kubevirt.io/storage.upload.target;
// phase UploadScheduled until the upload server is ready), conditions.go
// (the Bound,
// Ready and Running conditions and their reasons), and util.go
// (spec.storage defaults: ReadWriteOnce, Filesystem).
//
// Node selection for WaitForFirstConsumer storage follows CDI with the
// HonorWaitForFirstConsumer feature gate off: CDI then schedules its
// importer pod, the scheduler picks a node and sets
// volume.kubernetes.io/selected-node on the PVC. converge has no importer
// pod, so the controller picks the node itself among the Ready Nodes
// labelled v1alpha1.ImporterNodeLabel=true (the label the cdi-importer agent puts
// on its Node), the one with the fewest DataVolumes already placed, and
// sets the annotation so the provisioner provisions the volume there.
//
// Clones (clone.go). spec.source.pvc and spec.sourceRef (a DataSource:
// its spec.source.pvc, or one level of spec.source.dataSource) are cloned
// as CDI clones when no CSI clone or snapshot exists, host-assisted
// (pkg/controller/datavolume/pvc-clone-controller.go): the controller
// resolves the source PVC (read from the API server for DataSources,
// whose CRD may come later), waits while it or its DataVolume is not
// ready (Running=False CloneWithoutSource, CloneSourceNotReady), creates
// the PVC with k8s.io/CloneRequest naming the source and, without a size
// of its own, the source's size, places it on the node of the source's
// volume (not PickNode's choice) and writes CloneScheduled; the
// cdi-importer of that node copies the volume (CloneInProgress,
// Succeeded). A snapshot DataSource fails (no snapshots), and so does a
// clone whose PVC is bound on another node than its source
// (CrossNodeClone: the copy runs on one node). Sources in another
// namespace are refused (api/datavolume CheckClone: CDI authorizes them in
// its webhook, which converge does not have).
//
// Phase ownership. The controller writes Pending, WaitForFirstConsumer,
// ImportScheduled, CloneScheduled and UploadScheduled, claimName and the
// Bound condition; it never moves a DataVolume out of ImportInProgress,
// CloneInProgress, UploadReady, Succeeded or Failed, which belong to the
// node agent (api/datavolume's Owned).
// Uploads are placed like imports (PickNode counts them) since the same
// agent serves them.
//
// Filesystem overhead. The PVC of a spec.storage DataVolume of volume mode
// Filesystem asks for the requested size aligned to 1 MiB and divided by
// 1 - overhead (RequiredSpace), the overhead being the CDI CR's
// spec.config.filesystemOverhead for the claim's StorageClass, else its
// global, else 0.055 (Overhead), as CDI's renderPvcSpecVolumeSize over its
// CDIConfig; spec.pvc and Block claims keep their size. The CDI CR is the
// one the CDI operator deploys (Options.CDI). The cdi-importer still
// writes disk.img at the bound capacity, not the capacity less the
// overhead as CDI's importer does.
//
// In converge-controller the controller runs only while a native CDI
// exists (Options.Gate, the CDI operator's cdi-controller role).
package datavolume
