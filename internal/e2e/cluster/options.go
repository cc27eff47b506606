package cluster

import (
	"io"
	"path/filepath"
	"time"
)

// TestVersion is the version the tests build converge with: not the
// default "dev", so that the tests see it travel from the CLI (`converge
// version`, the image `converge install` deploys) to converge-controller
// (the node image it hands to the operators).
const TestVersion = "e2e"

// Options configure Build and Start. Make them with DefaultOptions.
type Options struct {
	// Version is every binary's internal/cli.Version and both images'
	// tag.
	Version string
	// Bin is the repository's bin directory: the cluster's binaries,
	// bin/cni, and bin/images/apt, the Debian package cache shared with
	// `make images`.
	Bin string
	// Out holds the built binaries (Out/build) and the image archives
	// with their input stamps; default Bin/images/e2e, apart from `make
	// images`' archives, whose builder and version differ.
	Out string
	// LockWait is how long Start waits while another process holds the
	// machine's cluster (default 20 minutes: `go test ./...` runs the
	// packages that start it in parallel).
	LockWait time.Duration
	// Progress receives a line per step (builds, images, the cluster's
	// start); nil discards them.
	Progress io.Writer
	// Registry, when set, serves both images from an OCI registry on the
	// node address that containerd mirrors their registry host to, so the
	// kubelet pulls them as from ghcr.io (serveImages); otherwise they are
	// imported into containerd.
	Registry bool
}

// DefaultOptions gives the options of the tests for the repository's bin
// directory bin: TestVersion, Out bin/images/e2e, LockWait 20 minutes,
// Registry on (the kubelet pulls the images, as users' clusters do).
func DefaultOptions(bin string) Options {
	return Options{
		Version:  TestVersion,
		Bin:      bin,
		Out:      filepath.Join(bin, "images", "e2e"),
		LockWait: 20 * time.Minute,
		Registry: true,
	}
}
