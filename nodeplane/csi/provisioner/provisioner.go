package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// Provisioner provisions and deletes the volumes of one node's CSI driver
// (see the package comment). It implements the library's Provisioner,
// BlockProvisioner, Qualifier and DeletionGuard interfaces.
type Provisioner struct {
	opts     Options
	driver   string
	nodeID   string
	segments map[string]string
}

var (
	_ controller.BlockProvisioner = (*Provisioner)(nil)
	_ controller.Qualifier        = (*Provisioner)(nil)
	_ controller.DeletionGuard    = (*Provisioner)(nil)
)

// New validates opts and asks the driver for its name (GetPluginInfo) and
// its node and topology (NodeGetInfo). The topology must be one segment
// set: the node-local volumes' affinity.
func New(ctx context.Context, opts Options) (*Provisioner, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	info, err := opts.Identity.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("provisioner: CSI GetPluginInfo: %w", err)
	}
	node, err := opts.Node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("provisioner: driver %s: CSI NodeGetInfo: %w", info.GetName(), err)
	}
	segs := node.GetAccessibleTopology().GetSegments()
	if len(segs) == 0 {
		return nil, fmt.Errorf("provisioner: driver %s on node %s reports no accessible topology; a node-local provisioner needs one to tell its volumes apart", info.GetName(), node.GetNodeId())
	}
	return &Provisioner{opts: opts, driver: info.GetName(), nodeID: node.GetNodeId(), segments: segs}, nil
}

// Name is the provisioner name: the CSI driver name, which StorageClasses
// give as their provisioner.
func (p *Provisioner) Name() string { return p.driver }

// NodeID is the node this provisioner serves (the driver's NodeGetInfo).
func (p *Provisioner) NodeID() string { return p.nodeID }

// Run runs the provisioning controller until ctx is done (no leader
// election: every node runs its own). It blocks.
func (p *Provisioner) Run(ctx context.Context) {
	c := controller.NewProvisionController(ctx, p.opts.Client, p.driver, p,
		controller.LeaderElection(false),
		controller.AddFinalizer(true),
		controller.ResyncPeriod(p.opts.ResyncPeriod),
		controller.Threadiness(p.opts.Threadiness),
	)
	c.Run(ctx)
}

// ShouldProvision takes claims whose selected node is this node, and
// claims without one (only an Immediate class reaches Provision without
// one; Provision refuses it).
func (p *Provisioner) ShouldProvision(_ context.Context, claim *corev1.PersistentVolumeClaim) bool {
	n := claim.Annotations[AnnSelectedNode]
	return n == "" || n == p.nodeID
}

// SupportsBlock is Options.SupportsBlock.
func (p *Provisioner) SupportsBlock(context.Context) bool { return p.opts.SupportsBlock }

// Provision creates the volume of a claim on this node through the
// driver's CreateVolume and returns its PV. A class with Immediate
// binding, or an access mode the driver refuses, is a final
// InvalidArgument (the library emits a ProvisioningFailed event and
// retries slowly); a claim selected for another node is ignored; a pool
// without room asks the scheduler for another node (Reschedule), except
// for a clone, which only its source's node can hold. A claim whose data
// source is a PVC is a clone of its volume (see cloneSource).
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	claim, class := o.PVC, o.StorageClass
	if class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return nil, controller.ProvisioningFinished, status.Errorf(codes.InvalidArgument,
			"StorageClass %s: volumeBindingMode Immediate is not supported by %s: its volumes are local to one node, so the class needs volumeBindingMode WaitForFirstConsumer", class.Name, p.driver)
	}
	if o.SelectedNodeName != p.nodeID {
		return nil, controller.ProvisioningFinished, &controller.IgnoredError{Reason: fmt.Sprintf("claim %s/%s is for node %q, this is node %q", claim.Namespace, claim.Name, o.SelectedNodeName, p.nodeID)}
	}
	req, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || req.Sign() <= 0 {
		return nil, controller.ProvisioningFinished, status.Errorf(codes.InvalidArgument, "PersistentVolumeClaim %s/%s: spec.resources.requests.storage: a positive size required", claim.Namespace, claim.Name)
	}
	caps, err := volumeCapabilities(claim, class.Parameters[ParameterFSType], class.MountOptions)
	if err != nil {
		return nil, controller.ProvisioningFinished, status.Error(codes.InvalidArgument, err.Error())
	}
	source, state, err := p.contentSource(ctx, claim)
	if err != nil {
		return nil, state, err
	}
	top := &csi.Topology{Segments: p.segments}
	resp, err := p.opts.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		VolumeContentSource:       source,
		Name:                      o.PVName,
		CapacityRange:             &csi.CapacityRange{RequiredBytes: req.Value()},
		VolumeCapabilities:        caps,
		Parameters:                driverParameters(class),
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{top}, Preferred: []*csi.Topology{top}},
	})
	if err != nil {
		st := status.Convert(err)
		err = status.Errorf(st.Code(), "PersistentVolumeClaim %s/%s: volume %s on node %s: CSI CreateVolume: %s", claim.Namespace, claim.Name, o.PVName, p.nodeID, st.Message())
		if c := st.Code(); source == nil && (c == codes.OutOfRange || c == codes.ResourceExhausted) {
			return nil, controller.ProvisioningReschedule, err
		}
		return nil, controller.ProvisioningFinished, err
	}
	if source != nil && resp.GetVolume().GetContentSource() == nil {
		// csi-provisioner's check: a volume made empty is no clone.
		err := fmt.Errorf("PersistentVolumeClaim %s/%s: volume %s: CSI CreateVolume answered without the content source", claim.Namespace, claim.Name, o.PVName)
		if _, derr := p.opts.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId()}); derr != nil {
			err = fmt.Errorf("%w; deleting it: %v", err, derr)
		}
		return nil, controller.ProvisioningInBackground, err
	}
	return buildPV(o.PVName, p.driver, claim, class, resp.GetVolume()), controller.ProvisioningFinished, nil
}

// ShouldDelete takes only PVs of this driver whose node affinity is this
// node's topology.
func (p *Provisioner) ShouldDelete(_ context.Context, pv *corev1.PersistentVolume) bool {
	return pv.Spec.CSI != nil && pv.Spec.CSI.Driver == p.driver && affinityMatches(pv, p.segments)
}

// Delete removes a PV's volume through the driver's DeleteVolume. A PV of
// another driver or node is ignored (another provisioner owns it).
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if !p.ShouldDelete(ctx, pv) {
		return &controller.IgnoredError{Reason: fmt.Sprintf("PersistentVolume %s is not a volume of %s on node %s", pv.Name, p.driver, p.nodeID)}
	}
	if _, err := p.opts.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle}); err != nil {
		return fmt.Errorf("PersistentVolume %s: deleting volume %s on node %s: %w", pv.Name, pv.Spec.CSI.VolumeHandle, p.nodeID, err)
	}
	return nil
}
