// Package clidownload is converge's hyperconverged-cluster-cli-download:
// converge-controller serves the `converge` CLI binaries it was built with
// over HTTPS, so that users of a cluster get the matching client from the
// cluster itself, as HCO's cli-download serves virtctl (HCO
// controllers/operands/cliDownload.go: a Deployment, Service and, on
// OpenShift, a Route and a ConsoleCLIDownload).
//
// Dir holds the binaries as `make cli-binaries` lays them out and the
// controller image carries them (/usr/share/converge/cli):
// <arch>/<os>/converge, with converge.exe for windows. The Server answers
//
//   - GET /: an HTML index linking every binary with its size and SHA-256;
//   - GET /<arch>/<os>/converge[.exe]: the binary
//     (application/octet-stream, as an attachment);
//   - GET /<arch>/<os>/converge[.exe].sha256: "<hex>  <name>\n", as
//     sha256sum prints it;
//   - GET /SHA256SUMS: one such line per binary, paths relative to /;
//   - GET /healthz: 200.
//
// The checksums are computed once, on the first request that needs them
// (the index, .sha256, SHA256SUMS; not at start-up, nor for a download);
// a failed read is tried again on the next such request. A binary replaced afterwards is still served but its
// checksum is not, and the Server must be remade (the image is
// immutable). Nothing outside Dir is
// reachable: files are opened through an os.Root, so a path leaving Dir
// or a symlink out of it is 404.
package clidownload
