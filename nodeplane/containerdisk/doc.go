// Package containerdisk pulls KubeVirt containerDisk images and takes the
// disk out of them, for the two node roles that read them: the VM agent's
// containerDisk volumes (nodeplane/vm/vmdisks, KubeVirt's
// pkg/container-disk) and the cdi-importer's registry source
// (nodeplane/cdi/importer, CDI's pkg/importer/registry-datasource.go and
// pkg/image/transport.go).
//
// The layout is KubeVirt's (docs/container-register-disks.md): the disk
// is the single regular file under /disk/ of the image's flattened
// filesystem, or the file a containerDisk's path names; CDI's importer
// takes the same single file under /disk/ (getImageFileName refuses none,
// several, or a directory). Images are pulled with
// github.com/google/go-containerregistry.
//
// Registries are reached over HTTPS; plain HTTP only for a loopback
// registry, or one the caller lists as insecure (the CDI CR's
// spec.config.insecureRegistries, CDI's IsInsecureRegistry), which is
// also reached over HTTPS without verifying its certificate, as CDI's
// importer does with INSECURETLS (containers/image
// DockerInsecureSkipTLSVerify). go-containerregistry on its own falls back
// to HTTP for private (RFC 1918) and .local registries too; Transport
// refuses those.
package containerdisk
