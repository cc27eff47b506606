// Package dataimportcron is converge's DataImportCron controller, the
// cdi-controller role for DataImportCrons (cdi.kubevirt.io/v1beta1, the
// CRD of components/cdi/dataimportcron_crd.cue): it keeps a DataSource
// pointed at the newest import of a registry image, as CDI's
// dataimportcron-controller does (kubevirt/containerized-data-importer
// pkg/controller/dataimportcron-controller.go and
// dataimportcron-conditions.go, v1.62 and later).
//
// Per DataImportCron whose spec.template has spec.source.registry.url:
//
//   - Polling. On spec.schedule (a cron expression parsed by
//     github.com/robfig/cron/v3's ParseStandard, as CDI: five fields or a
//     descriptor such as "@daily" or "@every 10m"; empty disables
//     polling) the controller asks the registry for the digest of the
//     image's tag (a HEAD of the manifest, internal/ociregistry's rules:
//     HTTPS, plain HTTP for loopback and the CDI CR's insecureRegistries;
//     the template's secretRef and certConfigMap as the importer uses
//     them) and records it in the annotations CDI's poller writes:
//     cdi.kubevirt.io/storage.import.sourceDesiredDigest and
//     .../lastCronTime, and .../nextCronTime for the next run. CDI polls
//     URL sources from a CronJob of cdi-source-update-poller pods;
//     converge has no such image and polls from the controller, as CDI
//     does for its ImageStream, PVC and node-pull sources. The schedule
//     is the trigger: "@every 1s" in a test is an ordinary schedule.
//   - Import. When the desired digest differs from the current import's,
//     the controller creates a DataVolume from spec.template named
//     <managedDataSource>-<12 hex digits of the digest> (CDI's
//     createDvName, shortened with a hash past 253 characters as
//     openshift/library-go's naming.GetName), its URL pinned to the digest
//     (docker://host/repo@sha256:…, the tag dropped), labelled
//     cdi.kubevirt.io/dataImportCron=<cron> (and
//     cdi.kubevirt.io/dataImportCron.cleanup=true under retentionPolicy
//     None) with CDI's recommended labels, annotated
//     cdi.kubevirt.io/storage.bind.immediate.requested and
//     .../lastUseTime, and records it in status.currentImports.
//   - Success. Once that DataVolume is Succeeded, status.lastImportedPVC
//     and lastImportTimestamp name it, its PVC's lastUseTime is renewed,
//     the DataSource spec.managedDataSource (created when missing,
//     labelled for the cron; one labelled for another cron that manages
//     it is left alone with a Warning event ErrDataSourceAlreadyManaged)
//     gets spec.source.pvc of it, and the imports beyond
//     spec.importsToKeep (default 3) are deleted, least recently used
//     first, unless spec.garbageCollect is Never. A PVC not yet touched
//     is as recent as its DataVolume (CDI's PVCs inherit the
//     DataVolume's lastUseTime; converge's DataVolume controller copies
//     labels only), and objects already being deleted do not count.
//   - Conditions. Progressing (ImportScheduled, ImportProgressing,
//     NoImport, or the DataVolume's phase) and UpToDate (NoDigest,
//     Outdated, ImportProgressing, UpToDate) with CDI's reasons and
//     messages; status.lastExecutionTimestamp is the last poll and
//     sourceFormat is pvc (converge has no VolumeSnapshots, so CDI's
//     snapshot format never applies).
//   - Deletion. The DataVolumes, PVCs and DataSource labelled for the
//     cron's cleanup are deleted when the cron is gone (CDI's cleanup:
//     no finalizer).
//
// A DataVolume of the cron that fails with a generic error is deleted and
// re-created at the next digest, as CDI's deleteErroneousDataVolume.
// Sources other than registry URLs (imageStream: no OpenShift image
// streams; http, pvc) are never polled: such a cron stays UpToDate=False
// NoDigest unless something else sets the desired-digest annotation.
// A poll that fails is retried after Options.RetryAfter with a Warning
// event DigestPollFailed; nextCronTime is not advanced until it works.
//
// The DataVolume's import itself is the cdi-importer node agent's
// (nodeplane/cdi/importcontroller); cdi.kubevirt.io/storage.bind.immediate.requested
// is set as CDI sets it, but converge's DataVolume controller places
// WaitForFirstConsumer imports on an importer node itself either way.
//
// Differences from CDI: status is written through the status subresource
// (converge's CRDs have one; CDI updates the whole object), no
// StorageProfiles (format always pvc, no storage-class change handling:
// the annotation cdi.kubevirt.io/storage.import.storageClass is not
// written), no Prometheus outdated gauge, and no CronJobs or Jobs.
//
// In converge-controller the controller runs only while a native CDI
// exists (Options.Gate, the CDI operator's cdi-controller role).
package dataimportcron
