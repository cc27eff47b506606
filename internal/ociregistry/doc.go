// Package ociregistry is how converge reaches OCI registries, on both
// sides: the node's containerDisk pulls and registry imports
// (nodeplane/containerdisk, nodeplane/vm/vmdisks, nodeplane/cdi/importer),
// with github.com/google/go-containerregistry; it lives outside the node
// plane so that cluster-side code may reach registries too.
//
// Registries are reached over HTTPS; plain HTTP only for a loopback
// registry, or one the caller lists as insecure (the CDI CR's
// spec.config.insecureRegistries, CDI's IsInsecureRegistry), which is
// also reached over HTTPS without verifying its certificate, as CDI's
// importer does with INSECURETLS (containers/image
// DockerInsecureSkipTLSVerify). go-containerregistry on its own falls back
// to HTTP for private (RFC 1918) and .local registries too; Transport
// refuses those.
package ociregistry
