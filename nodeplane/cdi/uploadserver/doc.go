// Package uploadserver is the upload endpoint of a node: CDI's
// cdi-uploadserver role in one HTTPS server for all the node's volumes, run
// by the node agent `converge-node cdi-importer`, next to the imports of
// nodeplane/cdi/importcontroller.
//
// Flow (the virtctl image-upload experience, see internal/cli
// imageupload.go):
//
//  1. A DataVolume with spec.source.upload gets its PVC (the DataVolume
//     controller, operators/cdi/datavolume); once the PVC is Bound to a
//     hostpath PV of this node, the ReadyMarker of this node's agent sets
//     the DataVolume's phase UploadReady (CDI: UploadScheduled →
//     UploadReady when the upload server pod runs).
//  2. The client creates an UploadTokenRequest and gets a signed token
//     in the answer (the aggregated API of converge-controller,
//     operators/cdi/uploadapi).
//  3. The upload proxy of converge-controller (operators/cdi/uploadproxy)
//     or the client itself reads the PV's node, that Node's endpoint annotations
//     (nodeendpoint.Upload of api/nodeendpoint: a self-signed certificate
//     pinned by fingerprint, as nodeplane/vm/console does), and POSTs the
//     image to /v1beta1/upload (nodeendpoint.UploadPath, CDI's uploadproxy
//     path) with "Authorization: Bearer <token>" (internal/nodeclient
//     Upload).
//  4. The Server verifies the token (api/uploadtoken: signature against
//     the public keys the issuer publishes, expiry, operation Upload),
//     checks that its namespace/name is a DataVolume with source.upload in
//     phase UploadReady whose PVC is Bound to a PV of this node, and only
//     then streams the body through nodeplane/cdi/importer (qcow2 → raw
//     with qemu-img, sparse, size checked against the PVC) into the
//     volume's disk.img. The DataVolume goes to Succeeded, or Failed with
//     the importer's reason for a permanent failure (not an image, too
//     big); an upload cut short leaves it UploadReady for another try.
//
// A missing, malformed, forged (other key) or expired token gets 401; a
// valid token for a volume that is not an upload DataVolume of this node,
// or not UploadReady, gets 403 or 409; nothing is written in any of these
// cases, and the volume's file is not even opened.
package uploadserver
