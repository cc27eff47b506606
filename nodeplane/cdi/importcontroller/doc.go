// Package importcontroller is converge's cdi-importer node agent (`converge-node
// cdi-importer`): on one node it fills the volumes of DataVolumes whose PVC
// is Bound to a PersistentVolume of the hostpath CSI driver
// (nodeplane/csi/hostpath) living on this node, and reports the
// DataVolume's import status. It plays the part of CDI's importer pod
// (kubevirt/containerized-data-importer cmd/cdi-importer) and of the
// status CDI's import controller derives from that pod.
//
// Sources: spec.source.http goes through nodeplane/cdi/importer (download,
// checksum, qcow2 → raw with qemu-img, sparse, size check) into
// <volume data dir>/disk.img for a Filesystem volume (CDI's file name) or
// the volume's disk file for a Block volume; spec.source.registry pulls
// the containerDisk image with go-containerregistry and takes its single
// file under /disk/ through the same steps (importer.ImportRegistry; the
// secretRef's accessKeyId and secretKey as basic auth, certConfigMap's
// CAs, Options.InsecureRegistries from the CDI CR, pullMethod node pulled
// alike: registry.go); spec.source.blank makes a
// sparse disk.img of the PVC size; a clone (spec.source.pvc or
// spec.sourceRef, its PVC annotated k8s.io/CloneRequest by the DataVolume
// controller) is a sparse copy of the source volume's disk, which must be
// a volume of this node (importer.Clone, clone.go; phase CloneInProgress
// in place of ImportInProgress). spec.source.upload is skipped (not an
// error): the upload server (nodeplane/cdi/uploadserver), run in the same process
// through Options.Setups, fills it. The checksum is the converge extension
// spec.source.http.checksum; spec.source.http.certConfigMap names a
// ConfigMap whose values are PEM CAs, as CDI.
//
// Status, written on the DataVolume through the status subresource:
// ImportInProgress with status.progress "NN.NN%" (at most every
// Options.StatusInterval), Running=True and Ready=False TransferRunning
// while it runs; Succeeded with progress "100.0%", Running=False Completed
// and Ready=True; after a failure Running=False with the importer's reason
// (importer.ReasonOf: NotFound, ChecksumMismatch, NotAnImage, TooBig, ...)
// and the error as message. A failure that the same bytes would repeat
// (ChecksumMismatch, NotAnImage, TooBig, InvalidInput) is Failed at once;
// any other (NotFound included: CDI's importer pod restarts until the URL
// answers) is retried Options.Retries times with doubling backoff,
// counting status.restartCount like CDI's pod restarts, then Failed.
//
// Volumes. The PV's volume handle is resolved with hostpath.LookupVolume
// (the driver's own layout and checks: a Ready volume of the named pool,
// no symlinks), so the agent writes only into volumes the driver created.
//
// Filesystem overhead. CDI keeps a share of a Filesystem PVC free for the
// filesystem inside it (CDIConfig spec.filesystemOverhead, global default
// "0.055", i.e. 5.5 %, per StorageClass overridable): an image fits only if
// its virtual size is at most the PVC size × (1 − overhead), and disk.img
// is grown to that usable size, not to the PVC size. converge applies no
// overhead: a hostpath volume is a directory of the pool's filesystem, not
// a filesystem of its own sized to the PVC, and the driver sets no quota,
// so disk.img is grown to the full PVC capacity (Block volumes: the
// backing file's size, as CDI). A DataVolume sized for CDI therefore
// imports here too; one sized to the byte for converge may be TooBig on
// CDI.
//
// Events (core/v1, source EventSource) on the DataVolume follow CDI's:
// Normal ImportInProgress, Normal ImportSucceeded, Warning ImportFailed.
//
// On start the agent labels its Node v1alpha1.ImporterNodeLabel=true so
// the DataVolume controller (operators/cdi/datavolume) places
// WaitForFirstConsumer imports here. What the two sides share (the PVC
// annotations, the conditions and their reasons, which phases belong to
// the agent) is api/datavolume.
package importcontroller
