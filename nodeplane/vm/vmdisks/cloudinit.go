package vmdisks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/api/vmisupport"
	"github.com/converge-dev/converge/nodeplane/network/dhcp"
)

// Volume labels and file names of the cloud-init data sources, as
// KubeVirt's pkg/cloud-init (GenerateLocalData) writes them.
const (
	NoCloudLabel     = "cidata"
	ConfigDriveLabel = "config-2"

	noCloudUserData        = "user-data"
	noCloudMetaData        = "meta-data"
	noCloudNetworkConfig   = "network-config"
	configDriveUserData    = "openstack/latest/user_data"
	configDriveMetaData    = "openstack/latest/meta_data.json"
	configDriveNetworkData = "openstack/latest/network_data.json"
)

// cloudInitSource holds the fields CloudInitNoCloudSource and
// CloudInitConfigDriveSource share.
type cloudInitSource struct {
	userDataSecretRef, networkDataSecretRef *corev1.LocalObjectReference
	userData, userDataBase64                string
	networkData, networkDataBase64          string
}

func cloudInitOf(v kubevirtv1.Volume) (src cloudInitSource, noCloud bool) {
	if s := v.CloudInitNoCloud; s != nil {
		return cloudInitSource{s.UserDataSecretRef, s.NetworkDataSecretRef, s.UserData, s.UserDataBase64, s.NetworkData, s.NetworkDataBase64}, true
	}
	s := v.CloudInitConfigDrive
	return cloudInitSource{s.UserDataSecretRef, s.NetworkDataSecretRef, s.UserData, s.UserDataBase64, s.NetworkData, s.NetworkDataBase64}, false
}

// checkCloudInit refuses what a cloud-init volume cannot be made from:
// a second cloud-init volume (KubeVirt reads only the first), more than
// one user data or network data source (KubeVirt's admission refuses
// that), base64 that does not decode, no data at all, a secretRef without
// a name or without a Secret getter.
func (d *Disks) checkCloudInit(errs *vmisupport.FieldErrors, vmi *kubevirtv1.VirtualMachineInstance, v kubevirtv1.Volume) {
	for _, other := range vmi.Spec.Volumes {
		if other.CloudInitNoCloud != nil || other.CloudInitConfigDrive != nil {
			if other.Name != v.Name {
				errs.Add("", "volume %q is already the VMI's cloud-init volume: converge, like KubeVirt, reads one per VMI", other.Name)
				return
			}
			break
		}
	}
	src, _ := cloudInitOf(v)
	count := func(ref *corev1.LocalObjectReference, inline, b64 string) int {
		n := 0
		for _, set := range []bool{ref != nil, inline != "", b64 != ""} {
			if set {
				n++
			}
		}
		return n
	}
	users, networks := count(src.userDataSecretRef, src.userData, src.userDataBase64), count(src.networkDataSecretRef, src.networkData, src.networkDataBase64)
	if users > 1 {
		errs.Add("userData", "set only one of userData, userDataBase64 and secretRef")
	}
	if networks > 1 {
		errs.Add("networkData", "set only one of networkData, networkDataBase64 and networkDataSecretRef")
	}
	if users+networks == 0 {
		errs.Add("", "no data: set userData, userDataBase64, secretRef, networkData, networkDataBase64 or networkDataSecretRef")
	}
	for _, f := range []struct{ path, v string }{{"userDataBase64", src.userDataBase64}, {"networkDataBase64", src.networkDataBase64}} {
		if _, err := base64.StdEncoding.DecodeString(f.v); err != nil {
			errs.Add(f.path, "not standard base64: %v", err)
		}
	}
	for _, f := range []struct {
		path string
		ref  *corev1.LocalObjectReference
	}{{"secretRef", src.userDataSecretRef}, {"networkDataSecretRef", src.networkDataSecretRef}} {
		if f.ref == nil {
			continue
		}
		if f.ref.Name == "" {
			errs.Add(f.path+".name", "required")
		}
		d.needSecrets(errs, f.path)
	}
}

// cloudInitData resolves one piece of data: inline, base64 or from the
// Secret ref (the first of keys found, as KubeVirt's
// readFirstFoundFileFromDir).
func (d *Disks) cloudInitData(ctx context.Context, namespace string, ref *corev1.LocalObjectReference, inline, b64 string, keys ...string) (string, error) {
	switch {
	case inline != "":
		return inline, nil
	case b64 != "":
		b, err := base64.StdEncoding.DecodeString(b64)
		return string(b), err
	case ref == nil:
		return "", nil
	}
	data, err := d.opts.Secrets(ctx, namespace, ref.Name)
	if err != nil {
		return "", fmt.Errorf("Secret %s/%s: %w", namespace, ref.Name, err)
	}
	for _, k := range keys {
		if v, ok := data[k]; ok {
			return string(v), nil
		}
	}
	return "", fmt.Errorf("Secret %s/%s: no key %s", namespace, ref.Name, strings.Join(keys, " or "))
}

// CloudInitFiles gives the files of a VMI's cloud-init volume v and the
// volume label, as KubeVirt's pkg/cloud-init writes them: for NoCloud,
// label cidata and user-data, meta-data (JSON: instance-type,
// instance-id, local-hostname) and network-config when there is network
// data; for ConfigDrive, label config-2 and openstack/latest/user_data,
// meta_data.json (instance_type, instance_id <name>.<namespace>, hostname,
// uuid) and network_data.json. Data from Secrets comes through
// Options.Secrets.
func (d *Disks) CloudInitFiles(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, v kubevirtv1.Volume) (files map[string][]byte, label string, err error) {
	src, noCloud := cloudInitOf(v)
	user, err := d.cloudInitData(ctx, vmi.Namespace, src.userDataSecretRef, src.userData, src.userDataBase64, "userdata", "userData")
	if err != nil {
		return nil, "", fmt.Errorf("user data: %w", err)
	}
	network, err := d.cloudInitData(ctx, vmi.Namespace, src.networkDataSecretRef, src.networkData, src.networkDataBase64, "networkdata", "networkData")
	if err != nil {
		return nil, "", fmt.Errorf("network data: %w", err)
	}
	if user == "" && network == "" {
		return nil, "", fmt.Errorf("user data or network data is required for a cloud-init volume (both are empty)")
	}
	instanceType := vmi.Annotations[kubevirtv1.ClusterInstancetypeAnnotation]
	if instanceType == "" {
		instanceType = vmi.Annotations[kubevirtv1.InstancetypeAnnotation]
	}
	if noCloud {
		meta, err := json.Marshal(noCloudMetadata{InstanceType: instanceType, InstanceID: instanceUUID(vmi), LocalHostname: hostname(vmi)})
		if err != nil {
			return nil, "", err
		}
		files = map[string][]byte{noCloudUserData: []byte(user), noCloudMetaData: meta}
		if network != "" {
			files[noCloudNetworkConfig] = []byte(network)
		}
		return files, NoCloudLabel, nil
	}
	meta, err := json.Marshal(configDriveMetadata{InstanceType: instanceType, InstanceID: vmi.Name + "." + vmi.Namespace, Hostname: hostname(vmi), UUID: instanceUUID(vmi)})
	if err != nil {
		return nil, "", err
	}
	files = map[string][]byte{configDriveUserData: []byte(user), configDriveMetaData: meta}
	if network != "" {
		files[configDriveNetworkData] = []byte(network)
	}
	return files, ConfigDriveLabel, nil
}

// noCloudMetadata is NoCloud's meta-data, as KubeVirt's
// cloudinit.NoCloudMetadata (public-keys come from accessCredentials,
// which converge refuses).
type noCloudMetadata struct {
	InstanceType  string `json:"instance-type,omitempty"`
	InstanceID    string `json:"instance-id"`
	LocalHostname string `json:"local-hostname,omitempty"`
}

// configDriveMetadata is ConfigDrive's meta_data.json, as KubeVirt's
// cloudinit.ConfigDriveMetadata (devices come from interface and host
// device tags, which converge refuses).
type configDriveMetadata struct {
	InstanceType string `json:"instance_type,omitempty"`
	InstanceID   string `json:"instance_id"`
	Hostname     string `json:"hostname,omitempty"`
	UUID         string `json:"uuid,omitempty"`
}

// instanceUUID is the VMI's firmware UUID, as KubeVirt's
// cloudInitUUIDFromVMI, else its metadata.uid: the domain's UUID either
// way (nodeplane/vm/domain).
func instanceUUID(vmi *kubevirtv1.VirtualMachineInstance) string {
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.UUID != "" {
		return string(fw.UUID)
	}
	return string(vmi.UID)
}

// hostname is the guest's host name, the one the VM agent's DHCP server
// gives it too (dhcp.Hostname: spec.hostname, else the VMI's name up to
// its first dot, as KubeVirt's dns.SanitizeHostname), so that cloud-init's
// local-hostname and the DHCP lease agree.
func hostname(vmi *kubevirtv1.VirtualMachineInstance) string { return dhcp.Hostname(vmi) }

// prepareCloudInit writes the VMI's cloud-init ISO at path.
func (d *Disks) prepareCloudInit(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, v kubevirtv1.Volume, path string) error {
	files, label, err := d.CloudInitFiles(ctx, vmi, v)
	if err != nil {
		return err
	}
	return WriteISO(path, label, files)
}
