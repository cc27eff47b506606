// Package cdioperator is converge's CDI operator, the counterpart of
// containerized-data-importer's cdi-operator: a thin package on
// operators/operand. For each CDI CR marked converge.dev/operator: native
// it derives components/cdi #Roles — the cdi-importer node agent
// (converge-node cdi-importer: CDI's importer and upload server pods, one
// per DataVolume, as one agent per node) with its ServiceAccount and RBAC —
// applies them in the operator's namespace, and writes the CR's status
// (Available, Progressing, Degraded from the importer DaemonSet's real
// readiness; observedGeneration; phase, operatorVersion, targetVersion,
// observedVersion as the controller-lifecycle-operator-sdk lays them out).
// It gates two converge-controller roles on a native CDI: RoleController
// (cdi-deployment: the DataVolume controller, operators/cdi/datavolume)
// and RoleAPIServer (cdi-apiserver: the upload token issuer,
// operators/cdi/uploadtoken).
//
// The importer fills hostpath CSI volumes, so its roles take an input
// besides the CR (operand.Inputs): the storage pools of the native
// HostPathProvisioner created first (Pools), re-derived when a
// HostPathProvisioner changes. Without one there is no importer, and the
// CDI, with nothing to wait for, is Available.
//
// The CDI CR's fields (containerized-data-importer-api core/v1beta1
// CDISpec, CDIConfigSpec, v1.62):
//
//	field                                  converge
//	-------------------------------------  ------------------------------------------------------------
//	imagePullPolicy                        honoured: the importer's pull policy (default IfNotPresent)
//	workload                               honoured: the importer's nodeSelector, affinity, tolerations
//	priorityClass                          honoured: the importer's priorityClassName
//	config.podResourceRequirements         honoured: the importer container's resources, cpu and
//	                                       memory over CDI's defaults (limits 750m/600M, requests
//	                                       100m/60M); other resources and claims refused
//	config.imagePullSecrets                honoured: the importer pod's imagePullSecrets
//	config.filesystemOverhead              honoured by the DataVolume controller: the PVC of a
//	                                       spec.storage Filesystem DataVolume asks for the size
//	                                       aligned to 1 MiB / (1 - overhead), per StorageClass else
//	                                       global (default 0.055), as CDI; a value that is not a
//	                                       Percent below 1 refused
//	config.scratchSpaceStorageClass        refused: converge imports without scratch space (the
//	                                       importer downloads and converts into temporary files in
//	                                       the target volume; no scratch PVC exists)
//	config.uploadProxyURLOverride          refused: no upload proxy; clients upload to the node's
//	                                       upload server, whose address converge-node publishes on
//	                                       its Node
//	config.importProxy                     refused: the agent takes no proxy settings yet
//	config.insecureRegistries              honoured: the importer's --insecure-registry flags; registry
//	                                       sources on those hosts are pulled over plain HTTP or
//	                                       unverified HTTPS (CDI's INSECURETLS)
//	config.preallocation                   refused when true: sparse images only
//	config.dataVolumeTTLSeconds            refused unless -1: no garbage collection of DataVolumes
//	config.logVerbosity                    refused: no verbosity setting in the CDI roles
//	config.featureGates                    HonorWaitForFirstConsumer and DataVolumeClaimAdoption
//	                                       (HCO sets both on every CDI) accepted, not run: the
//	                                       DataVolume controller places imports itself (CDI with
//	                                       the gate off) and adopts no PVC; any other gate refused
//	config.tlsSecurityProfile              accepted, not run (HCO sets it on every CDI): the upload
//	                                       server uses Go's TLS defaults
//	customizeComponents                    refused unless empty: patches cdi-operator's Deployments
//	cloneStrategyOverride                  copy accepted (converge's clones copy on the source's node,
//	                                       CDI's host-assisted clone); snapshot and csi-clone refused
//	infra nodeSelector/affinity/tolerations accepted, not run (HCO sets it from the HC's infra
//	                                       placement): CDI's infra roles run in converge-controller,
//	                                       placed by `converge install`
//	infra *Replicas                        refused: converge-controller is one Deployment
//	certConfig                             accepted, not run (HCO sets it on every CDI): no CDI
//	                                       serving certificates; the upload server's certificate is
//	                                       per node, pinned through its Node
//	uninstallStrategy                      accepted, not run (HCO sets it on every CDI): deleting the
//	                                       CDI removes the importer and stops the roles; DataVolumes
//	                                       and their volumes stay
//	any other field                        an error naming it (the CRD keeps unknown fields)
//
// A refused field makes the CR Degraded (reason UnsupportedConfiguration,
// the refusals as the message) and nothing is applied until it changes.
package cdioperator
