// Package registration registers a CSI driver with the kubelet, the role
// of node-driver-registrar (kubernetes-csi/node-driver-registrar,
// cmd/csi-node-driver-registrar): it serves the kubelet plugin
// registration API v1 (k8s.io/kubelet/pkg/apis/pluginregistration/v1) on
// a socket in the kubelet's plugins_registry directory, which the
// kubelet's plugin watcher finds, asks for the plugin's info (GetInfo:
// type CSIPlugin, the driver name, the CSI endpoint, the supported CSI
// versions), registers (dials the endpoint, NodeGetInfo, CSINode, node
// labels) and reports back (NotifyRegistrationStatus). A refusal ends
// Serve with the kubelet's error, as node-driver-registrar exits so that
// its container restarts and the registration is tried again.
package registration

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// SupportedVersions are the CSI versions the driver states, as
// node-driver-registrar does.
var SupportedVersions = []string{"1.0.0"}

// ErrRefused is wrapped by Serve's error when the kubelet refused the
// registration.
var ErrRefused = errors.New("the kubelet refused the plugin registration")

// Options configure Serve. Start from DefaultOptions.
type Options struct {
	// DriverName is the CSI driver's name (GetPluginInfo's).
	DriverName string
	// Socket is where the registration API is served:
	// <kubelet dir>/plugins_registry/<driver>-reg.sock.
	Socket string
	// Endpoint is the CSI socket's path as the kubelet sees it (on the
	// host): <kubelet dir>/plugins/<driver>/csi.sock.
	Endpoint string
	// Versions are the supported CSI versions (SupportedVersions).
	Versions []string
	// Log receives the kubelet's calls and answers; nil is slog.Default.
	Log *slog.Logger
}

// DefaultOptions gives the kubelet's paths under kubeletDir
// (/var/lib/kubelet) for driver and SupportedVersions.
func DefaultOptions(driver, kubeletDir string) Options {
	return Options{
		DriverName: driver,
		Socket:     SocketPath(kubeletDir, driver),
		Endpoint:   EndpointPath(kubeletDir, driver),
		Versions:   SupportedVersions,
	}
}

// SocketPath is the registration socket of driver under kubeletDir, where
// the kubelet's plugin watcher looks: <kubeletDir>/plugins_registry/<driver>-reg.sock.
func SocketPath(kubeletDir, driver string) string {
	return filepath.Join(kubeletDir, "plugins_registry", driver+"-reg.sock")
}

// EndpointPath is the conventional CSI socket of driver under kubeletDir:
// <kubeletDir>/plugins/<driver>/csi.sock.
func EndpointPath(kubeletDir, driver string) string {
	return filepath.Join(kubeletDir, "plugins", driver, "csi.sock")
}

// Validate checks that every field is set and both paths are absolute.
func (o Options) Validate() error {
	var errs []error
	if o.DriverName == "" {
		errs = append(errs, errors.New("registration: driver name: required"))
	}
	for _, p := range []struct{ name, path string }{{"registration socket", o.Socket}, {"kubelet registration path (CSI endpoint)", o.Endpoint}} {
		if !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path {
			errs = append(errs, fmt.Errorf("registration: %s %q: expected an absolute, clean path", p.name, p.path))
		}
	}
	if len(o.Versions) == 0 {
		errs = append(errs, errors.New("registration: supported versions: at least one required"))
	}
	return errors.Join(errs...)
}

// server implements the registration service.
type server struct {
	registerapi.UnimplementedRegistrationServer
	opts    Options
	log     *slog.Logger
	refused chan error
	once    sync.Once
}

// GetInfo answers the kubelet's plugin watcher.
func (s *server) GetInfo(_ context.Context, _ *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	s.log.Info("kubelet asked for the plugin info", "endpoint", s.opts.Endpoint, "versions", s.opts.Versions)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.opts.DriverName,
		Endpoint:          s.opts.Endpoint,
		SupportedVersions: s.opts.Versions,
	}, nil
}

// NotifyRegistrationStatus logs the kubelet's answer; a refusal ends
// Serve (after this reply is sent).
func (s *server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.GetPluginRegistered() {
		s.log.Info("kubelet registered the plugin")
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	err := fmt.Errorf("driver %s: %w: %s", s.opts.DriverName, ErrRefused, st.GetError())
	s.log.Error("kubelet refused the plugin registration", "error", st.GetError())
	s.once.Do(func() { s.refused <- err })
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Serve serves the registration API on o.Socket (creating its directory,
// removing a stale socket left there; any other file there is an error,
// and the socket is made owner-only) until ctx ends, when it returns nil,
// or until the kubelet refuses the registration, when it returns the
// error (wrapping ErrRefused) with the kubelet's message. The socket is
// removed when Serve returns.
func Serve(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("driver", o.DriverName, "socket", o.Socket)
	lis, err := listen(o.Socket)
	if err != nil {
		return err
	}
	defer os.Remove(o.Socket) // when the listener did not already
	s := &server{opts: o, log: log, refused: make(chan error, 1)}
	g := grpc.NewServer()
	registerapi.RegisterRegistrationServer(g, s)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	log.Info("serving the kubelet plugin registration")
	select {
	case <-ctx.Done():
		g.GracefulStop()
		<-served
		return nil
	case err := <-s.refused:
		g.GracefulStop() // the kubelet gets its reply
		<-served
		return err
	case err := <-served:
		return fmt.Errorf("registration socket %s: %w", o.Socket, err)
	}
}

// listen opens the unix socket path as Serve describes.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("registration socket %s: %w", path, err)
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("registration socket %s: exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("registration socket %s: removing the stale socket: %w", path, err)
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("registration socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("registration socket %s: %w", path, err)
	}
	return lis, nil
}
