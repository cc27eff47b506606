package hostpath

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// identityServer is the CSI Identity service.
type identityServer struct {
	csi.UnimplementedIdentityServer
	d *Driver
}

func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: s.d.opts.DriverName, VendorVersion: Version}, nil
}

func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	svc := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		svc(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		svc(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

// Probe reports ready when every pool's path still leads to the directory
// opened at start (a Mounted pool still waiting for its mount does not
// count: the other pools serve meanwhile).
func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	for _, p := range s.d.pools {
		if err := p.check(); err != nil && !errors.Is(err, errNotMounted) {
			s.d.log.Warn("probe: not ready", "error", err)
			return &csi.ProbeResponse{Ready: wrapperspb.Bool(false)}, nil
		}
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
