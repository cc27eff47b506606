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
// github.com/google/go-containerregistry, through internal/ociregistry
// (HTTPS; plain HTTP for loopback and insecure registries only).
package containerdisk
