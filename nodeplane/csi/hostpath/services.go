package hostpath

import "github.com/container-storage-interface/spec/lib/go/csi"

// Identity returns the driver's CSI Identity service for in-process callers
// (the PVC provisioner of `converge-node hostpath-csi --kubeconfig`), the
// same service Register serves over gRPC.
func (d *Driver) Identity() csi.IdentityServer { return &identityServer{d: d} }

// Controller returns the driver's CSI Controller service for in-process
// callers; calls take the driver's lock like gRPC calls do.
func (d *Driver) Controller() csi.ControllerServer { return &controllerServer{d: d} }

// Node returns the driver's CSI Node service for in-process callers.
func (d *Driver) Node() csi.NodeServer { return &nodeServer{d: d} }
