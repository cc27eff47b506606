// Package cdi_test runs converge's CDI roles together, as a cluster runs
// them, on real parts: a kube-apiserver and etcd (and
// kube-controller-manager for the chains), the cluster side as
// converge-controller runs it (the DataVolume controller,
// operators/cdi/datavolume; the upload token issuer,
// operators/cdi/uploadtoken) and the node side as `converge-node
// cdi-importer` runs it (the import controller,
// nodeplane/cdi/importcontroller; the upload server,
// nodeplane/cdi/uploadserver; the hostpath CSI driver and its
// provisioner), with images made by qemu-img. The `converge image-upload`
// CLI runs in-process (internal/cli).
//
// These tests start both sides, so they live here rather than beside
// either side's code, which imports only the contract between them
// (api/datavolume, api/uploadtoken, api/nodeendpoint). They need no root;
// they skip without qemu-img or the control-plane binaries in bin/
// (internal/testing/storagetest and controlplane say when
// CONVERGE_REQUIRE_NODEPLANE makes that a failure).
package cdi_test
