// Package vmdisks makes, on a converge node, the disks of the VMI volumes
// KubeVirt makes in a virt-launcher pod, and finds the disks of PVC and
// DataVolume volumes; converge runs VMs without pods, so the VM agent
// (`converge-node vm`, nodeplane/vm/agent) calls it around each domain.
//
// Every file of a VMI is in its own directory,
// <state>/vmis/<namespace>_<name>_<uid>/, named after the volume:
//
//	volume                 file             made by Prepare
//	containerDisk          <volume>.qcow2   a qcow2 overlay on the cached image (qemu-img create -b … -F …)
//	emptyDisk              <volume>.qcow2   a sparse qcow2 image of capacity
//	cloudInitNoCloud       <volume>.iso     ISO 9660 "cidata": user-data, meta-data, network-config
//	cloudInitConfigDrive   <volume>.iso     ISO 9660 "config-2": openstack/latest/{user_data,meta_data.json,network_data.json}
//	secret, configMap      <volume>.iso     ISO 9660 (volumeLabel, default "cfgdata"): one file per key
//
// Disks.Resolve gives those paths without touching the disk
// (domain.Options.ResolveVolume) and refuses the values it cannot honour,
// with the field's path; Disks.Prepare makes the files before the domain
// is defined (idempotent: ISOs are made again from the current data,
// emptyDisk images and containerDisk overlays are kept); Disks.Release
// removes the directory once the domain is gone, so nothing of the VMI is
// left on the node. As in KubeVirt, emptyDisk data and what the guest
// wrote on a containerDisk go with the VMI.
//
// ISOs are made with github.com/diskfs/go-diskfs (ISO 9660 with Rock
// Ridge and Joliet names, as KubeVirt's xorrisofs -joliet -rock), with the
// files and metadata of KubeVirt's pkg/cloud-init and pkg/config.
//
// containerDisk images are pulled with github.com/google/go-containerregistry
// (linux/amd64 from a multi-platform index; pull secrets of type
// kubernetes.io/dockerconfigjson or dockercfg; HTTPS, plain HTTP only for
// loopback registries) and the disk taken as KubeVirt does: the single
// entry under /disk/, or containerDisk.path. The node caches it by
// manifest digest under <state>/containerdisks/ (written under a lock
// through a temporary directory renamed into place, so concurrent pulls of
// one digest do not collide), raw or qcow2 by its magic, a qcow2 refused
// when it names a backing or data file; the VMI boots from its own qcow2
// overlay, so the cached image is only ever read. imagePullPolicy is the
// kubelet's: Always resolves the tag at the registry (only the manifest
// is fetched when the digest is cached), IfNotPresent reuses the digest
// the reference had at its last pull, Never only that. Pulls run in the
// background: Prepare waits Options.PullWait for one, then reports the
// volume not ready (domain.ErrVolumeNotReady) and the agent asks again,
// so a long pull holds up neither the agent nor the node's other VMIs.
// The cache is not pruned.
//
// PVCResolver (domain.Options.ResolvePVC) follows a bound PVC to its PV
// and the hostpath CSI driver's volume on this node
// (nodeplane/cdi/importcontroller.Resolve), and waits
// (domain.ErrVolumeNotReady) while the PVC is not bound or its DataVolume
// has not Succeeded.
package vmdisks
