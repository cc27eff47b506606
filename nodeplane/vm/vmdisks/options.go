package vmdisks

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ObjectGetter gives the data of a Secret or ConfigMap (data and
// binaryData merged) namespace/name; a missing object wraps ErrNotFound.
type ObjectGetter func(ctx context.Context, namespace, name string) (map[string][]byte, error)

// ErrNotFound is wrapped by an ObjectGetter's error when the object does
// not exist.
var ErrNotFound = errors.New("not found")

// Options configure Disks. Start from DefaultOptions.
type Options struct {
	// StateDir is the agent's directory: each VMI's disks go to
	// <StateDir>/vmis/<namespace>_<name>_<uid>/, the containerDisk cache
	// to <StateDir>/containerdisks/. Required, absolute.
	StateDir string
	// QemuImg is the qemu-img binary (emptyDisk images, containerDisk
	// overlays, qcow2 checks).
	QemuImg string
	// Secrets gives a Secret's data (cloud-init secretRefs, secret
	// volumes, imagePullSecret); nil refuses VMIs that need one.
	Secrets ObjectGetter
	// ConfigMaps gives a ConfigMap's data (configMap volumes); nil
	// refuses VMIs that need one.
	ConfigMaps ObjectGetter
	// Platform is the platform picked from a multi-platform containerDisk
	// image index.
	Platform v1.Platform
	// Transport carries the registry requests; nil is
	// remote.DefaultTransport. Plain-HTTP requests to registries other than
	// loopback ones are refused whatever the transport.
	Transport http.RoundTripper
	// PullTimeout bounds one containerDisk pull (manifest and layers).
	PullTimeout time.Duration
	// PullWait is how long Prepare waits for a containerDisk pull; a pull
	// still running then goes on in the background and Prepare's error
	// wraps domain.ErrVolumeNotReady (the agent tries again later).
	PullWait time.Duration
	// Log receives one line per pull, cache hit and release.
	Log logr.Logger
}

// DefaultOptions gives the options for stateDir: qemu-img from PATH,
// linux/amd64 images, the default transport, a 30 min pull timeout of
// which Prepare waits 10 s, no logging and no Secret or ConfigMap
// getters.
func DefaultOptions(stateDir string) Options {
	return Options{
		StateDir:    stateDir,
		QemuImg:     "qemu-img",
		Platform:    v1.Platform{OS: "linux", Architecture: "amd64"},
		Transport:   remote.DefaultTransport,
		PullTimeout: 30 * time.Minute,
		PullWait:    10 * time.Second,
		Log:         logr.Discard(),
	}
}
