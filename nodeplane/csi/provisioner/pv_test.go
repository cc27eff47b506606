package provisioner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func claim(modes []corev1.PersistentVolumeAccessMode, block bool) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	c.Spec.AccessModes = modes
	if block {
		m := corev1.PersistentVolumeBlock
		c.Spec.VolumeMode = &m
	}
	return c
}

func TestVolumeCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name    string
		modes   []corev1.PersistentVolumeAccessMode
		block   bool
		want    []csi.VolumeCapability_AccessMode_Mode
		wantErr string
	}{
		{"rwo", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, false, []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER}, ""},
		{"rwop block", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, true, []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER}, ""},
		{"rox+rwx", []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany}, false, []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}, ""},
		{"none", nil, false, nil, "PersistentVolumeClaim ns/c: spec.accessModes: at least one required"},
		{"unknown", []corev1.PersistentVolumeAccessMode{"ReadSometimes"}, false, nil, `PersistentVolumeClaim ns/c: access mode "ReadSometimes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caps, err := volumeCapabilities(claim(tc.modes, tc.block), "xfs", []string{"noatime"})
			if tc.wantErr != "" {
				if err == nil || !contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []csi.VolumeCapability_AccessMode_Mode
			for _, c := range caps {
				got = append(got, c.GetAccessMode().GetMode())
				if tc.block != (c.GetBlock() != nil) || !tc.block != (c.GetMount() != nil) {
					t.Errorf("capability %v: want block=%v", c, tc.block)
				}
				if !tc.block && (c.GetMount().GetFsType() != "xfs" || !reflect.DeepEqual(c.GetMount().GetMountFlags(), []string{"noatime"})) {
					t.Errorf("mount capability %v: want fsType xfs, flags [noatime]", c.GetMount())
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("modes = %v, want %v", got, tc.want)
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestAffinityMatches(t *testing.T) {
	me := map[string]string{"topology.hostpath.csi/node": "a"}
	pv := func(na *corev1.VolumeNodeAffinity) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: na}}
	}
	own := nodeAffinity([]*csi.Topology{{Segments: me}})
	other := nodeAffinity([]*csi.Topology{{Segments: map[string]string{"topology.hostpath.csi/node": "b"}}})
	twoKeys := nodeAffinity([]*csi.Topology{{Segments: map[string]string{"topology.hostpath.csi/node": "a", "zone": "z"}}})
	either := nodeAffinity([]*csi.Topology{{Segments: map[string]string{"topology.hostpath.csi/node": "b"}}, {Segments: me}})
	notIn := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.hostpath.csi/node", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"b"}}}}}}}
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want bool
	}{
		{"own node", pv(own), true},
		{"other node", pv(other), false},
		{"extra key this node lacks", pv(twoKeys), false},
		{"second term", pv(either), true},
		{"no affinity", pv(nil), false},
		{"NotIn is not ours", pv(notIn), false},
		{"empty term", pv(&corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}}), false},
	} {
		if got := affinityMatches(tc.pv, me); got != tc.want {
			t.Errorf("%s: affinityMatches = %v, want %v", tc.name, got, tc.want)
		}
	}
	if nodeAffinity(nil) != nil {
		t.Error("nodeAffinity(nil) must be nil")
	}
}

func TestBuildPV(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	class := &storagev1.StorageClass{
		ObjectMeta:    metav1.ObjectMeta{Name: "hostpath-csi-local"},
		Parameters:    map[string]string{"storagePool": "local", ParameterFSType: "ext4"},
		MountOptions:  []string{"noatime"},
		ReclaimPolicy: &retain,
	}
	vol := &csi.Volume{VolumeId: "pvc-1", CapacityBytes: 10 << 20, VolumeContext: map[string]string{"storagePool": "local"},
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{"topology.hostpath.csi/node": "a"}}}}
	for _, block := range []bool{false, true} {
		c := claim([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, block)
		pv := buildPV("pvc-1", "kubevirt.io.hostpath-provisioner", c, class, vol)
		if pv.Name != "pvc-1" || pv.Spec.CSI.Driver != "kubevirt.io.hostpath-provisioner" || pv.Spec.CSI.VolumeHandle != "pvc-1" {
			t.Errorf("block=%v: name/driver/handle = %s/%s/%s", block, pv.Name, pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
		}
		if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("10Mi")) != 0 {
			t.Errorf("block=%v: capacity %s, want 10Mi", block, q.String())
		}
		if pv.Spec.PersistentVolumeReclaimPolicy != retain || !reflect.DeepEqual(pv.Spec.MountOptions, []string{"noatime"}) {
			t.Errorf("block=%v: reclaim %s, mount options %v: want the class's", block, pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.MountOptions)
		}
		wantMode, wantFS := corev1.PersistentVolumeFilesystem, "ext4"
		if block {
			wantMode, wantFS = corev1.PersistentVolumeBlock, ""
		}
		if *pv.Spec.VolumeMode != wantMode || pv.Spec.CSI.FSType != wantFS {
			t.Errorf("block=%v: volumeMode %s fsType %q, want %s %q", block, *pv.Spec.VolumeMode, pv.Spec.CSI.FSType, wantMode, wantFS)
		}
		if !affinityMatches(pv, map[string]string{"topology.hostpath.csi/node": "a"}) {
			t.Errorf("block=%v: node affinity %v does not name node a", block, pv.Spec.NodeAffinity)
		}
	}
	class.ReclaimPolicy = nil
	if pv := buildPV("pvc-1", "d", claim([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, false), class, vol); pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("no class reclaim policy: got %s, want Delete", pv.Spec.PersistentVolumeReclaimPolicy)
	}
}
