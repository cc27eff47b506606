package vmsnapshot_test

import (
	"slices"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmsnapshot"
)

func class(name, driver string, isDefault bool) snapv1.VolumeSnapshotClass {
	c := snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver}
	if isDefault {
		c.Annotations = map[string]string{vmsnapshot.DefaultClassAnnotation: "true"}
	}
	return c
}

// TestSnapshotClass: the class of the StorageClass's provisioner, the
// default annotation deciding between several, as KubeVirt.
func TestSnapshotClass(t *testing.T) {
	tests := []struct {
		name    string
		classes []snapv1.VolumeSnapshotClass
		want    string
		wantErr bool
	}{
		{"none", nil, "", false},
		{"other driver only", []snapv1.VolumeSnapshotClass{class("a", "other", true)}, "", false},
		{"the only one of the driver", []snapv1.VolumeSnapshotClass{class("a", "other", true), class("b", "hostpath", false)}, "b", false},
		{"the default among several", []snapv1.VolumeSnapshotClass{class("a", "hostpath", false), class("b", "hostpath", true)}, "b", false},
		{"several without a default", []snapv1.VolumeSnapshotClass{class("a", "hostpath", false), class("b", "hostpath", false)}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := vmsnapshot.SnapshotClass("hostpath", tt.classes)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("SnapshotClass = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// vmWith gives a VM whose template has volumes vs.
func vmWith(vs ...kubevirtv1.Volume) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
		Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: vs}}}}
}

var (
	pvcVol = kubevirtv1.Volume{Name: "disk", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "disk-claim"}}}}
	dvVol        = kubevirtv1.Volume{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "root-dv"}}}
	containerVol = kubevirtv1.Volume{Name: "cd", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "x"}}}
	cloudInitVol = kubevirtv1.Volume{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}}
)

// TestSplitVolumes: volumes with a backup are included, the others
// excluded; a left-out PVC or DataVolume makes the snapshot partial,
// containerDisk and cloudInit do not.
func TestSplitVolumes(t *testing.T) {
	tests := []struct {
		name          string
		vm            *kubevirtv1.VirtualMachine
		backedUp      map[string]bool
		included, exc []string
		partial       bool
	}{
		{"all claims backed up", vmWith(dvVol, pvcVol, containerVol, cloudInitVol), map[string]bool{"root": true, "disk": true},
			[]string{"root", "disk"}, []string{"cd", "ci"}, false},
		{"a claim without a class", vmWith(dvVol, pvcVol, cloudInitVol), map[string]bool{"root": true},
			[]string{"root"}, []string{"disk", "ci"}, true},
		{"nothing snapshottable", vmWith(containerVol, cloudInitVol), nil, nil, []string{"cd", "ci"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, ex, partial := vmsnapshot.SplitVolumes(tt.vm, tt.backedUp)
			if !slices.Equal(in, tt.included) || !slices.Equal(ex, tt.exc) || partial != tt.partial {
				t.Errorf("SplitVolumes = %v, %v, %v; want %v, %v, %v", in, ex, partial, tt.included, tt.exc, tt.partial)
			}
		})
	}
}

// TestClaims: a PVC volume's claim, a DataVolume's PVC of its name, none
// for the others.
func TestClaims(t *testing.T) {
	got := vmsnapshot.Claims(vmWith(dvVol, pvcVol, containerVol, cloudInitVol))
	want := map[string]string{"root": "root-dv", "disk": "disk-claim"}
	if len(got) != len(want) || got["root"] != want["root"] || got["disk"] != want["disk"] {
		t.Errorf("Claims = %v, want %v", got, want)
	}
}
