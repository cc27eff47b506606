package vmrestore_test

import (
	"slices"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmrestore"
)

func restore(edit func(*snapshotv1.VirtualMachineRestore)) *snapshotv1.VirtualMachineRestore {
	r := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "u1"},
		Spec: snapshotv1.VirtualMachineRestoreSpec{Target: corev1.TypedLocalObjectReference{Kind: "VirtualMachine", Name: "vm2"}, VirtualMachineSnapshotName: "s"}}
	if edit != nil {
		edit(r)
	}
	return r
}

// TestClaimName: KubeVirt's restored claim names, and the policies
// converge refuses naming the field.
func TestClaimName(t *testing.T) {
	policy := func(p snapshotv1.VolumeRestorePolicy) func(*snapshotv1.VirtualMachineRestore) {
		return func(r *snapshotv1.VirtualMachineRestore) { r.Spec.VolumeRestorePolicy = &p }
	}
	tests := []struct {
		name    string
		r       *snapshotv1.VirtualMachineRestore
		want    string
		wantErr string
	}{
		{"default: randomized", restore(nil), "restore-u1-disk", ""},
		{"RandomizeNames", restore(policy(snapshotv1.VolumeRestorePolicyRandomizeNames)), "restore-u1-disk", ""},
		{"PrefixTargetName", restore(policy(snapshotv1.VolumeRestorePolicyPrefixTargetName)), "vm2-disk", ""},
		{"override wins", restore(func(r *snapshotv1.VirtualMachineRestore) {
			r.Spec.VolumeRestorePolicy = ptr(snapshotv1.VolumeRestorePolicyPrefixTargetName)
			r.Spec.VolumeRestoreOverrides = []snapshotv1.VolumeRestoreOverride{{VolumeName: "other", RestoreName: "x"}, {VolumeName: "disk", RestoreName: "mine"}}
		}), "mine", ""},
		{"InPlace refused", restore(policy(snapshotv1.VolumeRestorePolicyInPlace)), "", "spec.volumeRestorePolicy"},
		{"unknown refused", restore(policy("Sideways")), "", "spec.volumeRestorePolicy"},
		{"too long refused", restore(func(r *snapshotv1.VirtualMachineRestore) {
			r.Spec.VolumeRestorePolicy = ptr(snapshotv1.VolumeRestorePolicyPrefixTargetName)
			r.Spec.Target.Name = strings.Repeat("v", 60)
		}), "", "longer than 63"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := vmrestore.ClaimName(tt.r, "disk")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ClaimName = %q, %v; want an error naming %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ClaimName = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestClaimFor: the restored claim takes the source's spec, the snapshot
// as data source, at least its restore size, drops the provisioning
// annotations and carries the restore's marks and the overrides.
func TestClaimFor(t *testing.T) {
	class := "hostpath-csi-local"
	b := snapshotv1.VolumeBackup{VolumeName: "disk", VolumeSnapshotName: ptr("vs1"), PersistentVolumeClaim: snapshotv1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "disk-claim", Labels: map[string]string{"app": "db"},
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes", "cdi.kubevirt.io/storage.contentType": "kubevirt",
				"cdi.kubevirt.io/storage.import.endpoint": "http://x", "team": "a"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}, VolumeName: "pv-old"}}}
	src := &snapshotv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns"}}
	tests := []struct {
		name        string
		restoreSize string
		overrides   []snapshotv1.VolumeRestoreOverride
		wantSize    string
		wantLabels  map[string]string
	}{
		{"source size kept", "32Mi", nil, "64Mi", map[string]string{"app": "db"}},
		{"grown to the restore size", "128Mi", nil, "128Mi", map[string]string{"app": "db"}},
		{"override labels", "", []snapshotv1.VolumeRestoreOverride{{VolumeName: "disk", Labels: map[string]string{"app": "web", "x": "y"}}}, "64Mi", map[string]string{"app": "web", "x": "y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := restore(func(r *snapshotv1.VirtualMachineRestore) { r.Spec.VolumeRestoreOverrides = tt.overrides })
			vs := &snapv1.VolumeSnapshot{}
			if tt.restoreSize != "" {
				q := resource.MustParse(tt.restoreSize)
				vs.Status = &snapv1.VolumeSnapshotStatus{RestoreSize: &q}
			}
			pvc, err := vmrestore.ClaimFor(r, "restore-u1-disk", b, vs, src)
			if err != nil {
				t.Fatal(err)
			}
			if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse(tt.wantSize)) != 0 {
				t.Errorf("size %s, want %s", got.String(), tt.wantSize)
			}
			if pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Kind != "VolumeSnapshot" || pvc.Spec.DataSource.Name != "vs1" ||
				pvc.Spec.DataSourceRef == nil || pvc.Spec.DataSourceRef.Name != "vs1" || *pvc.Spec.DataSource.APIGroup != "snapshot.storage.k8s.io" {
				t.Errorf("data source %+v / %+v, want VolumeSnapshot vs1", pvc.Spec.DataSource, pvc.Spec.DataSourceRef)
			}
			if pvc.Spec.VolumeName != "" || *pvc.Spec.StorageClassName != class {
				t.Errorf("volumeName %q class %v: want none and the source's", pvc.Spec.VolumeName, *pvc.Spec.StorageClassName)
			}
			for k, v := range tt.wantLabels {
				if pvc.Labels[k] != v {
					t.Errorf("label %s=%q, want %q", k, pvc.Labels[k], v)
				}
			}
			if pvc.Labels[vmrestore.SourceNameLabel] != "vm1" || pvc.Labels[vmrestore.SourceNamespaceLabel] != "ns" {
				t.Errorf("labels %v lack the source VM", pvc.Labels)
			}
			want := map[string]string{"cdi.kubevirt.io/storage.contentType": "kubevirt", "team": "a",
				vmrestore.NameAnnotation: "r", vmrestore.LastRestoreAnnotation: "r-u1"}
			if len(pvc.Annotations) != len(want) {
				t.Errorf("annotations %v, want %v", pvc.Annotations, want)
			}
			for k, v := range want {
				if pvc.Annotations[k] != v {
					t.Errorf("annotation %s=%q, want %q", k, pvc.Annotations[k], v)
				}
			}
		})
	}
}

// snapVM is a snapshot's VM: a DataVolume root disk from a template, a
// PVC data disk, a cloud-init disk.
func snapVM(running *bool) *snapshotv1.VirtualMachine {
	vm := &snapshotv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns", Labels: map[string]string{"app": "db"}},
		Spec: kubevirtv1.VirtualMachineSpec{
			DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root-dv"}, Spec: cdiv1.DataVolumeSpec{}},
				{ObjectMeta: metav1.ObjectMeta{Name: "scratch-dv"}, Spec: cdiv1.DataVolumeSpec{}}},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: []kubevirtv1.Volume{
				{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "root-dv"}}},
				{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-claim"}}}},
				{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}},
			}}}}}
	if running != nil {
		vm.Spec.Running = running //nolint:staticcheck // the legacy field
	} else {
		vm.Spec.RunStrategy = ptr(kubevirtv1.RunStrategyAlways)
	}
	return vm
}

// TestRestoredVM: the restored volumes point at their claims, a template
// DataVolume's volume becomes a claim and its template goes, the rest is
// the snapshot's; a new VM is Halted, an existing one keeps its run
// strategy.
func TestRestoredVM(t *testing.T) {
	restores := []snapshotv1.VolumeRestore{{VolumeName: "root", PersistentVolumeClaimName: "restore-u1-root"}, {VolumeName: "data", PersistentVolumeClaimName: "restore-u1-data"}}
	existing := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns", UID: "vmuid", ResourceVersion: "7", Labels: map[string]string{"keep": "me"}},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr(kubevirtv1.RunStrategyManual)}}
	tests := []struct {
		name     string
		src      *snapshotv1.VirtualMachine
		target   *kubevirtv1.VirtualMachine
		wantName string
		wantRS   *kubevirtv1.VirtualMachineRunStrategy
		running  *bool
		label    string
	}{
		{name: "new VM", src: snapVM(nil), wantName: "vm2", wantRS: ptr(kubevirtv1.RunStrategyHalted), label: "app"},
		{name: "new VM of a running:true VM", src: snapVM(ptr(true)), wantName: "vm2", running: ptr(false), label: "app"},
		{name: "the source itself", src: snapVM(nil), target: existing, wantName: "vm1", wantRS: ptr(kubevirtv1.RunStrategyManual), label: "keep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := restore(func(r *snapshotv1.VirtualMachineRestore) {
				r.Status = &snapshotv1.VirtualMachineRestoreStatus{Restores: restores}
			})
			vm, err := vmrestore.RestoredVM(r, tt.src, tt.target)
			if err != nil {
				t.Fatal(err)
			}
			if vm.Name != tt.wantName || vm.Namespace != "ns" || vm.Labels[tt.label] == "" {
				t.Errorf("VM %s/%s labels %v, want %s/ns with label %s", vm.Namespace, vm.Name, vm.Labels, tt.wantName, tt.label)
			}
			if tt.target != nil && (vm.UID != tt.target.UID || vm.ResourceVersion != tt.target.ResourceVersion) {
				t.Errorf("the existing VM's identity was not kept: %s %s", vm.UID, vm.ResourceVersion)
			}
			if tt.wantRS != nil && (vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != *tt.wantRS || vm.Spec.Running != nil) { //nolint:staticcheck // the legacy field
				t.Errorf("runStrategy %v running %v, want %s", vm.Spec.RunStrategy, vm.Spec.Running, *tt.wantRS) //nolint:staticcheck // the legacy field
			}
			if tt.running != nil && (vm.Spec.Running == nil || *vm.Spec.Running != *tt.running) { //nolint:staticcheck // the legacy field
				t.Errorf("running %v, want %v", vm.Spec.Running, *tt.running) //nolint:staticcheck // the legacy field
			}
			vols := vm.Spec.Template.Spec.Volumes
			if len(vols) != 3 || vols[0].PersistentVolumeClaim == nil || vols[0].PersistentVolumeClaim.ClaimName != "restore-u1-root" ||
				vols[1].PersistentVolumeClaim == nil || vols[1].PersistentVolumeClaim.ClaimName != "restore-u1-data" || vols[2].CloudInitNoCloud == nil {
				t.Errorf("volumes %+v, want root and data on their restored claims and cloud-init as it was", vols)
			}
			var names []string
			for _, d := range vm.Spec.DataVolumeTemplates {
				names = append(names, d.Name)
			}
			if !slices.Equal(names, []string{"scratch-dv"}) {
				t.Errorf("dataVolumeTemplates %v, want [scratch-dv]", names)
			}
			if vm.Annotations[vmrestore.LastRestoreAnnotation] != "r-u1" {
				t.Errorf("annotations %v lack %s", vm.Annotations, vmrestore.LastRestoreAnnotation)
			}
			if tt.src.Spec.Template.Spec.Volumes[0].DataVolume == nil {
				t.Error("RestoredVM changed the snapshot's VM")
			}
		})
	}
}

// TestDeletedDataVolumes: the templates the restored VM no longer has.
func TestDeletedDataVolumes(t *testing.T) {
	tpl := func(names ...string) []kubevirtv1.DataVolumeTemplateSpec {
		var out []kubevirtv1.DataVolumeTemplateSpec
		for _, n := range names {
			out = append(out, kubevirtv1.DataVolumeTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return out
	}
	tests := []struct {
		name     string
		old, new []kubevirtv1.DataVolumeTemplateSpec
		want     []string
	}{
		{"none before", nil, tpl("a"), nil},
		{"kept", tpl("a"), tpl("a"), nil},
		{"dropped", tpl("a", "b", "c"), tpl("b"), []string{"a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := vmrestore.DeletedDataVolumes(tt.old, tt.new); !slices.Equal(got, tt.want) {
				t.Errorf("DeletedDataVolumes = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPatch: spec.patches change the new VM's manifest; a bad patch is an
// error naming spec.patches.
func TestPatch(t *testing.T) {
	base := func() *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm2", Labels: map[string]string{"app": "db"}}}
	}
	tests := []struct {
		name    string
		patches []string
		check   func(*kubevirtv1.VirtualMachine) bool
		wantErr bool
	}{
		{"none", nil, func(vm *kubevirtv1.VirtualMachine) bool { return vm.Name == "vm2" }, false},
		{"label replaced and added", []string{`{"op": "replace", "path": "/metadata/labels/app", "value": "web"}`, `{"op": "add", "path": "/metadata/labels/copy", "value": "yes"}`},
			func(vm *kubevirtv1.VirtualMachine) bool {
				return vm.Labels["app"] == "web" && vm.Labels["copy"] == "yes"
			}, false},
		{"not JSON", []string{`{"op": `}, nil, true},
		{"path missing", []string{`{"op": "replace", "path": "/spec/template/spec/nothing", "value": 1}`}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm, err := vmrestore.Patch(base(), tt.patches)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "spec.patches") {
					t.Fatalf("Patch error %v, want one naming spec.patches", err)
				}
				return
			}
			if err != nil || !tt.check(vm) {
				t.Errorf("Patch = %+v, %v", vm.ObjectMeta, err)
			}
		})
	}
}
