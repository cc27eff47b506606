// Package images builds converge's two container images without a Docker
// engine, with go-containerregistry, as reproducible image archives that
// `ctr images import` (containerd) and `docker load` take:
//
//   - converge-controller (ControllerReference): the CGO_ENABLED=0
//     converge-controller at /usr/bin/converge-controller, /etc/passwd and
//     /etc/group with the nonroot user 65532 its Deployment runs as
//     (components/controller), and Debian's CA bundle for the Git servers
//     it fetches from over TLS;
//   - converge-node (NodeReference): Debian bookworm packages unpacked
//     without maintainer scripts (libvirtd, virtlogd, QEMU, qemu-img, nft
//     and their dependency closure, NodePackages), converge-node at
//     /usr/bin/converge-node, the CNI plugins at /opt/cni/bin, the CA
//     bundle (the CDI importer downloads over https) and the users and
//     groups libvirtd looks up.
//
// Build is the whole job (hack/images runs it behind `make images`):
// Fetch resolves and downloads the Debian packages with apt itself into a
// private cache, the Tree of each image becomes gzip layers with fixed
// times and owners, and WriteArchive writes a docker-archive tarball
// (manifest.json with RepoTags). The same inputs give byte-identical
// archives.
//
// Nothing shipped links this package: it is development tooling.
package images
