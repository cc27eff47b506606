package v1alpha1

// Well-known labels and keys of converge's storage roles (CDI and the
// hostpath CSI driver), shared by the controllers and the node agents.
const (
	// ImporterNodeLabel marks, with value "true", the Nodes where a
	// cdi-importer agent runs (`converge-node cdi-importer`, set by
	// nodeplane/cdi/importcontroller on start); only they are chosen by
	// the DataVolume controller (operators/cdi/datavolume) for
	// WaitForFirstConsumer imports and uploads (the agent runs the upload
	// server too).
	ImporterNodeLabel = "converge.dev/cdi-importer"

	// HostpathTopologyKey is the CSI topology segment key of the hostpath
	// CSI driver (nodeplane/csi/hostpath) naming the node a volume lives
	// on, its value the driver's node ID; its PersistentVolumes carry it
	// as a required node affinity term.
	HostpathTopologyKey = "topology.hostpath.csi/node"
)
