// Package datasource is the DataSource controller, CDI's
// datasource-controller (containerized-data-importer
// pkg/controller/datasource-controller.go, v1.64): it keeps each
// cdi.kubevirt.io/v1beta1 DataSource's Ready condition and status.source
// true to what its spec.source names, so that whoever consumes the
// DataSource (a VM's dataVolumeTemplate sourceRef, virtctl, the console)
// can tell a boot source that can be cloned from one that cannot yet.
//
// Ready, for the source the DataSource resolves to — its spec.source, or
// the spec.source of the DataSource its spec.source.dataSource names (CDI's
// ResolveDataSourceChain: in the same namespace, not itself, one level):
//
//	source                                          Ready  reason
//	----------------------------------------------  -----  ---------------------------------
//	PVC whose DataVolume has Succeeded              True   Ready
//	PVC without a DataVolume, the PVC exists        True   Ready
//	PVC whose DataVolume is in another phase        False  <the phase; Pending if unset>
//	PVC and DataVolume both missing                 False  NotFound
//	spec.source.dataSource missing                  False  NotFound
//	spec.source.dataSource in another namespace     False  CrossNamespaceReference
//	spec.source.dataSource naming itself            False  SelfReference
//	a chain of more than one spec.source.dataSource False  MaxReferenceDepthReached
//	spec.source.snapshot                            False  SnapshotNotSupported
//	no source                                       False  NoSource
//
// status.source is the resolved source while Ready is True and empty
// otherwise, as CDI's update leaves it.
//
// Converge's own: the snapshot row (the hostpath CSI driver has no volume
// snapshots, so a snapshot source never becomes ready; CDI reports the
// VolumeSnapshot's readiness) and the Pending reason of a DataVolume not
// yet given a phase (CDI's reason is then empty). Not done: CDI copies
// the allowed labels (instancetype defaults, dynamic credentials) of the
// source DataVolume and PVC onto a Ready DataSource.
//
// A condition's lastTransitionTime moves when its status changes and
// lastHeartbeatTime when anything in it changes; a reconcile that finds nothing new writes nothing (CDI
// refreshes the heartbeat on every reconcile).
//
// It watches DataSources, and the DataVolumes and PVCs a DataSource names
// (by namespace and name), so that an import finishing or a PVC going
// moves the condition without a resync.
package datasource
