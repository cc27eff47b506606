package datavolume

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func cdiWith(fo map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI",
		"metadata": map[string]any{"name": "cdi"}, "spec": map[string]any{}}}
	if fo != nil {
		u.Object["spec"] = map[string]any{"config": map[string]any{"filesystemOverhead": fo}}
	}
	return u
}

// TestOverhead follows CDI's GetFilesystemOverheadForStorageClass over a
// CDIConfig status: no CDI 0, the StorageClass's value, else the global,
// else 0.055; a value CDI's Percent does not allow, or 1, names the field.
func TestOverhead(t *testing.T) {
	per := map[string]any{"global": "0.1", "storageClass": map[string]any{"fast": "0", "slow": "0.2"}}
	for _, tc := range []struct {
		name  string
		cdi   *unstructured.Unstructured
		class string
		want  float64
		err   string
	}{
		{name: "no CDI", cdi: nil, class: "fast", want: 0},
		{name: "CDI without overhead: CDI's default", cdi: cdiWith(nil), class: "x", want: 0.055},
		{name: "the class's value", cdi: cdiWith(per), class: "slow", want: 0.2},
		{name: "a class of 0", cdi: cdiWith(per), class: "fast", want: 0},
		{name: "another class: the global", cdi: cdiWith(per), class: "other", want: 0.1},
		{name: "no class: the global", cdi: cdiWith(per), class: "", want: 0.1},
		{name: "empty global: the default", cdi: cdiWith(map[string]any{"global": ""}), want: 0.055},
		{name: "one", cdi: cdiWith(map[string]any{"global": "1"}), err: `CDI cdi: spec.config.filesystemOverhead.global "1": expected a fraction`},
		{name: "four decimals", cdi: cdiWith(map[string]any{"storageClass": map[string]any{"a": "0.0555"}}), class: "a", err: `spec.config.filesystemOverhead.storageClass["a"] "0.0555"`},
		{name: "a percentage", cdi: cdiWith(map[string]any{"global": "5%"}), err: `global "5%"`},
		{name: "not a string", cdi: cdiWith(map[string]any{"global": 0.1}), err: "spec.config.filesystemOverhead.global"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Overhead(tc.cdi, tc.class)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("Overhead = %v, %v; want an error containing %q", got, err, tc.err)
				}
			case err != nil || got != tc.want:
				t.Errorf("Overhead = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestRequiredSpace checks CDI's GetRequiredSpace: aligned up to 1 MiB,
// then divided by 1 - overhead, rounded up.
func TestRequiredSpace(t *testing.T) {
	for _, tc := range []struct {
		overhead  float64
		requested int64
		want      int64
	}{
		{0, 1 << 30, 1 << 30},
		{0, 1<<20 + 1, 2 << 20},
		{0.055, 1 << 30, 1136234735}, // ceil(1073741824 / 0.945)
		{0.5, 10 << 20, 20 << 20},
	} {
		if got := RequiredSpace(tc.overhead, tc.requested); got != tc.want {
			t.Errorf("RequiredSpace(%v, %d) = %d, want %d", tc.overhead, tc.requested, got, tc.want)
		}
	}
}

// TestClaimSpecOverhead: a spec.storage Filesystem claim grows by the
// overhead; Block and spec.pvc keep their size, as CDI.
func TestClaimSpecOverhead(t *testing.T) {
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}
	block := corev1.PersistentVolumeBlock
	dv := func(mut func(*cdiv1.DataVolume)) *cdiv1.DataVolume {
		d := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n"},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}}}
		mut(d)
		return d
	}
	for _, tc := range []struct {
		name string
		dv   *cdiv1.DataVolume
		want int64
	}{
		{"storage, Filesystem", dv(func(d *cdiv1.DataVolume) { d.Spec.Storage = &cdiv1.StorageSpec{Resources: size} }), 1136234735},
		{"storage, Block", dv(func(d *cdiv1.DataVolume) { d.Spec.Storage = &cdiv1.StorageSpec{Resources: size, VolumeMode: &block} }), 1 << 30},
		{"pvc, taken as it is", dv(func(d *cdiv1.DataVolume) { d.Spec.PVC = &corev1.PersistentVolumeClaimSpec{Resources: size} }), 1 << 30},
	} {
		spec, err := ClaimSpec(tc.dv, 0.055)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if q := spec.Resources.Requests[corev1.ResourceStorage]; q.Value() != tc.want {
			t.Errorf("%s: size %s, want %d", tc.name, q.String(), tc.want)
		}
	}
	d := dv(func(d *cdiv1.DataVolume) { d.Spec.Storage = &cdiv1.StorageSpec{Resources: size} })
	if _, err := ClaimSpec(d, 0.055); err != nil || d.Spec.Storage.Resources.Requests.Storage().Value() != 1<<30 {
		t.Errorf("ClaimSpec changed the DataVolume's size: %v", d.Spec.Storage.Resources.Requests.Storage())
	}
}
