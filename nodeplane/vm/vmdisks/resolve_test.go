package vmdisks_test

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/vmdisks"
)

// TestResolve: the path and format of each kind of volume in the VMI's
// directory, and the values refused with their path relative to the
// volume source; Resolve writes nothing.
func TestResolve(t *testing.T) {
	d, state := newDisks(t, objects{}, objects{})
	noGetters, err := vmdisks.New(vmdisks.DefaultOptions(state))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, "vmis", "ns_vm_uid-vm")
	cap0 := resource.MustParse("0")
	cap1 := resource.MustParse("1Gi")
	for _, tc := range []struct {
		name    string
		disks   *vmdisks.Disks
		vols    []kubevirtv1.Volume // the last one is resolved
		want    domain.DiskSource
		wantErr string
	}{
		{name: "containerDisk is a qcow2 overlay", vols: []kubevirtv1.Volume{volume("root", kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:43"}})},
			want: domain.DiskSource{Path: filepath.Join(dir, "root.qcow2"), Format: "qcow2"}},
		{name: "emptyDisk is qcow2", vols: []kubevirtv1.Volume{volume("scratch", kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: cap1}})},
			want: domain.DiskSource{Path: filepath.Join(dir, "scratch.qcow2"), Format: "qcow2"}},
		{name: "cloudInitNoCloud is a raw ISO", vols: []kubevirtv1.Volume{volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}})},
			want: domain.DiskSource{Path: filepath.Join(dir, "ci.iso"), Format: "raw"}},
		{name: "cloudInitConfigDrive from a Secret", vols: []kubevirtv1.Volume{volume("ci", kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "s"}}})},
			want: domain.DiskSource{Path: filepath.Join(dir, "ci.iso"), Format: "raw"}},
		{name: "secret", vols: []kubevirtv1.Volume{volume("sec", kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "s", VolumeLabel: "OEMDRV"}})},
			want: domain.DiskSource{Path: filepath.Join(dir, "sec.iso"), Format: "raw"}},
		{name: "configMap", vols: []kubevirtv1.Volume{volume("cm", kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}})},
			want: domain.DiskSource{Path: filepath.Join(dir, "cm.iso"), Format: "raw"}},

		{name: "containerDisk values", vols: []kubevirtv1.Volume{volume("root", kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "Bad Image", Path: "/", ImagePullPolicy: "Sometimes"}})},
			wantErr: `image: "Bad Image": could not parse reference: Bad Image; imagePullPolicy: "Sometimes": expected Always, IfNotPresent or Never; path: "/": names the image's root: expected the disk file's path`},
		{name: "containerDisk without image", vols: []kubevirtv1.Volume{volume("root", kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{}})},
			wantErr: "image: required"},
		{name: "pull secret without a Secret getter", disks: noGetters, vols: []kubevirtv1.Volume{volume("root", kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "fedora", ImagePullSecret: "pull"}})},
			wantErr: "imagePullSecret: this node reads no Secrets (the agent has no Secret getter)"},
		{name: "emptyDisk of 0 bytes", vols: []kubevirtv1.Volume{volume("scratch", kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: cap0}})},
			wantErr: "capacity: 0: expected at least 1 byte"},
		{name: "cloud-init without data", vols: []kubevirtv1.Volume{volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{}})},
			wantErr: ": no data: set userData, userDataBase64, secretRef, networkData, networkDataBase64 or networkDataSecretRef"},
		{name: "cloud-init with two user data sources and bad base64", vols: []kubevirtv1.Volume{volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "a", UserDataBase64: "!!", NetworkDataSecretRef: &corev1.LocalObjectReference{}}})},
			wantErr: "networkDataSecretRef.name: required; userData: set only one of userData, userDataBase64 and secretRef; userDataBase64: not standard base64: illegal base64 data at input byte 0"},
		{name: "cloud-init secretRef without a Secret getter", disks: noGetters, vols: []kubevirtv1.Volume{volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "s"}}})},
			wantErr: "secretRef: this node reads no Secrets (the agent has no Secret getter)"},
		{name: "a second cloud-init volume", vols: []kubevirtv1.Volume{
			volume("first", kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{UserData: "a"}}),
			volume("second", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "b"}})},
			wantErr: `: volume "first" is already the VMI's cloud-init volume: converge, like KubeVirt, reads one per VMI`},
		{name: "secret without name, label too long", vols: []kubevirtv1.Volume{volume("sec", kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{VolumeLabel: strings.Repeat("L", 33)}})},
			wantErr: `secretName: required; volumeLabel: "` + strings.Repeat("L", 33) + `": expected at most 32 bytes (an ISO 9660 volume identifier)`},
		{name: "configMap without a ConfigMap getter", disks: noGetters, vols: []kubevirtv1.Volume{volume("cm", kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}})},
			wantErr: "name: this node reads no ConfigMaps (the agent has no ConfigMap getter)"},
		{name: "a volume name that is no file name", vols: []kubevirtv1.Volume{volume("../x", kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: cap1}})},
			wantErr: `volume name "../x": it names a file on the node: expected no '/' and no leading '.'`},
		{name: "not a node volume", vols: []kubevirtv1.Volume{volume("pvc", kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}})},
			wantErr: `volume "pvc": not a volume the node prepares`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disks := tc.disks
			if disks == nil {
				disks = d
			}
			vmi := vmiWith("vm", tc.vols...)
			got, err := disks.Resolve(vmi, tc.vols[len(tc.vols)-1])
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if files := treeFiles(t, state); len(files) != 0 {
		t.Errorf("Resolve wrote %v", files)
	}
}

// TestResolveThroughBuild: domain.Build places a resolver's field errors
// under the volume's source path and defines the prepared volumes with
// their format as the disk driver type.
func TestResolveThroughBuild(t *testing.T) {
	d, _ := newDisks(t, objects{}, objects{})
	o := domain.DefaultOptions()
	o.ResolveVolume = d.Resolve
	vmi := vmiWith("vm",
		volume("root", kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:43", ImagePullPolicy: "Sometimes"}}),
		volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{}}))
	q := resource.MustParse("64Mi")
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	_, err := domain.Build(vmi, o)
	want := `VirtualMachineInstance ns/vm: spec.volumes[0].containerDisk.imagePullPolicy: "Sometimes": expected Always, IfNotPresent or Never; ` +
		"spec.volumes[1].cloudInitNoCloud: no data: set userData, userDataBase64, secretRef, networkData, networkDataBase64 or networkDataSecretRef"
	if err == nil || err.Error() != want {
		t.Fatalf("Build error %v, want %s", err, want)
	}
	vmi.Spec.Volumes[0].ContainerDisk.ImagePullPolicy = ""
	vmi.Spec.Volumes[1].CloudInitNoCloud.UserData = "#cloud-config"
	dom, err := domain.Build(vmi, o)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(dom.Devices.Disks); n != 2 {
		t.Fatalf("%d disks", n)
	}
	for i, want := range []string{"qcow2", "raw"} {
		if got := dom.Devices.Disks[i].Driver.Type; got != want {
			t.Errorf("disk %d driver type %s, want %s", i, got, want)
		}
	}
}
