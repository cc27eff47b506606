package vmadmission_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// TestCheckDataVolumeTemplates: KubeVirt's dataVolumeTemplate validation
// (pkg/storage/admitters/data-volume-template.go) and the sources
// converge imports.
func TestCheckDataVolumeTemplates(t *testing.T) {
	storage := &cdiv1.StorageSpec{}
	http := &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://images.local/root.img"}}
	tmpl := func(name string, spec cdiv1.DataVolumeSpec) kubevirtv1.DataVolumeTemplateSpec {
		return kubevirtv1.DataVolumeTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	vm := func(volumes []string, ts ...kubevirtv1.DataVolumeTemplateSpec) *kubevirtv1.VirtualMachine {
		v := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: kubevirtv1.VirtualMachineSpec{DataVolumeTemplates: ts, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
		for i, n := range volumes {
			src := kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: n}}
			if i%2 == 1 {
				src = kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}}
			}
			v.Spec.Template.Spec.Volumes = append(v.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: n, VolumeSource: src})
		}
		return v
	}
	tests := []struct {
		name string
		vm   *kubevirtv1.VirtualMachine
		want []string
	}{
		{"http, by a dataVolume volume", vm([]string{"root"}, tmpl("root", cdiv1.DataVolumeSpec{Source: http, Storage: storage})), nil},
		{"blank, by a persistentVolumeClaim volume", vm([]string{"x", "data"}, tmpl("data", cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, PVC: &corev1.PersistentVolumeClaimSpec{}})), nil},
		{"no name", vm(nil, tmpl("", cdiv1.DataVolumeSpec{Source: http, Storage: storage})),
			[]string{"spec.dataVolumeTemplates[0].metadata.name: 'name' field must not be empty for DataVolumeTemplate entry"}},
		{"no storage", vm([]string{"root"}, tmpl("root", cdiv1.DataVolumeSpec{Source: http})),
			[]string{"spec.dataVolumeTemplates[0].spec: Missing Data volume PVC or Storage"}},
		{"pvc and storage", vm([]string{"root"}, tmpl("root", cdiv1.DataVolumeSpec{Source: http, Storage: storage, PVC: &corev1.PersistentVolumeClaimSpec{}})),
			[]string{"spec.dataVolumeTemplates[0].spec: Duplicate storage definition, both target storage and target pvc defined"}},
		{"no source", vm([]string{"root"}, tmpl("root", cdiv1.DataVolumeSpec{Storage: storage})),
			[]string{"spec.dataVolumeTemplates[0].spec.source: Data volume should have either Source, SourceRef, or be externally populated"}},
		{"two sources", vm([]string{"root"}, tmpl("root", cdiv1.DataVolumeSpec{Storage: storage,
			Source: &cdiv1.DataVolumeSource{HTTP: http.HTTP, Blank: &cdiv1.DataVolumeBlankImage{}}})),
			[]string{"spec.dataVolumeTemplates[0].spec.source: Multiple dataVolume sources"}},
		{"external population with a source", vm([]string{"root"}, tmpl("root", cdiv1.DataVolumeSpec{Source: http,
			Storage: &cdiv1.StorageSpec{DataSourceRef: &corev1.TypedObjectReference{Kind: "VolumeSnapshot", Name: "s"}}})),
			[]string{"spec.dataVolumeTemplates[0].spec.source: External population is incompatible with Source and SourceRef"}},
		{"not referenced", vm([]string{"other"}, tmpl("root", cdiv1.DataVolumeSpec{Source: http, Storage: storage})),
			[]string{"spec.dataVolumeTemplates[0]: DataVolumeTemplate entry spec.dataVolumeTemplates[0] must be referenced in the VMI template's 'volumes' list"}},
		{"another namespace", vm([]string{"root"}, func() kubevirtv1.DataVolumeTemplateSpec {
			t := tmpl("root", cdiv1.DataVolumeSpec{Source: http, Storage: storage})
			t.Namespace = "other"
			return t
		}()), []string{`spec.dataVolumeTemplates[0].metadata.namespace: "other": a VirtualMachine's DataVolumes are created in its namespace "default"`}},
		{"a clone from another namespace (authorized by CheckDataVolumeClones)", vm([]string{"root"}, tmpl("root", cdiv1.DataVolumeSpec{Storage: storage,
			Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "images", Name: "fedora"}}})), nil},
		{"a clone of a DataSource", vm([]string{"root"}, tmpl("root", cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{},
			SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Name: "fedora"}})), nil},
		{"a DataSource of another kind", vm([]string{"root"}, tmpl("root", cdiv1.DataVolumeSpec{Storage: storage,
			SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "VolumeSnapshot", Name: "fedora"}})),
			[]string{`spec.dataVolumeTemplates[0].spec.sourceRef: spec.sourceRef.kind "VolumeSnapshot": expected DataSource (converge's DataVolume controller)`}},
		{"the second of two", vm([]string{"root", "data"}, tmpl("root", cdiv1.DataVolumeSpec{Source: http, Storage: storage}), tmpl("data", cdiv1.DataVolumeSpec{Source: http})),
			[]string{"spec.dataVolumeTemplates[1].spec: Missing Data volume PVC or Storage"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := vmadmission.CheckDataVolumeTemplates(tt.vm)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("CheckDataVolumeTemplates = %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("error %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestCheckWithDataVolumeTemplates: the webhook's check of a VM includes
// its dataVolumeTemplates.
func TestCheckWithDataVolumeTemplates(t *testing.T) {
	obj := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"namespace":"default","name":"web"},"spec":{"runStrategy":"Halted",` +
		`"dataVolumeTemplates":[{"metadata":{"name":"root"},"spec":{"storage":{"resources":{"requests":{"storage":"1Gi"}}},"source":{"registry":{"url":"docker://quay.io/x"}}}}],` +
		`"template":{"spec":{"domain":{"devices":{"disks":[{"name":"root","disk":{}}]},"resources":{"requests":{"memory":"64Mi"}}},` +
		`"volumes":[{"name":"root","persistentVolumeClaim":{"claimName":"root"}}]}}}}`
	errs, err := vmadmission.Check(vmadmission.VirtualMachineKind, []byte(obj))
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || errs[0].Path != "spec.dataVolumeTemplates[0].spec.source" {
		t.Errorf("Check = %v, want one error at spec.dataVolumeTemplates[0].spec.source", errs)
	}
	ok := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"namespace":"default","name":"web"},"spec":{"runStrategy":"Halted",` +
		`"dataVolumeTemplates":[{"metadata":{"name":"root"},"spec":{"storage":{"resources":{"requests":{"storage":"1Gi"}}},"source":{"http":{"url":"http://images.local/root.img"}}}}],` +
		`"template":{"spec":{"domain":{"devices":{"disks":[{"name":"root","disk":{}}]},"resources":{"requests":{"memory":"64Mi"}}},` +
		`"volumes":[{"name":"root","persistentVolumeClaim":{"claimName":"root"}}]}}}}`
	if errs, err := vmadmission.Check(vmadmission.VirtualMachineKind, []byte(ok)); err != nil || len(errs) != 0 {
		t.Errorf("Check of a VM with an http dataVolumeTemplate = %v, %v; want it accepted", errs, err)
	}
}
