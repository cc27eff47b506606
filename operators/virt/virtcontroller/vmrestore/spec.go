package vmrestore

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
)

// The labels and annotations of KubeVirt's restore controller.
const (
	// LastRestoreAnnotation marks the objects a restore wrote with
	// <restore name>-<restore UID>.
	LastRestoreAnnotation = "restore.kubevirt.io/lastRestoreUID"
	// NameAnnotation names the restore on the claims it created
	// (KubeVirt's RestoreNameAnnotation).
	NameAnnotation = "restore.kubevirt.io/name"
	// SourceNameLabel and SourceNamespaceLabel name the snapshot's VM on
	// each restored claim.
	SourceNameLabel      = "restore.kubevirt.io/source-vm-name"
	SourceNamespaceLabel = "restore.kubevirt.io/source-vm-namespace"
	// OwnedByVMAnnotation marks a claim restored for a VM that did not
	// exist yet, to be owned by it once created.
	OwnedByVMAnnotation = "restore.kubevirt.io/owned-by-vm"
	// contentTypeAnnotation is the one provisioning annotation kept.
	contentTypeAnnotation = "cdi.kubevirt.io/storage.contentType"
)

// droppedAnnotationPrefixes are the source claim's annotations a restored
// claim does not take (KubeVirt's restoreAnnotationsToDelete).
var droppedAnnotationPrefixes = []string{"pv.kubernetes.io", "volume.beta.kubernetes.io", "cdi.kubevirt.io",
	"volume.kubernetes.io", "k8s.io/CloneRequest", "k8s.io/CloneOf"}

// LastRestoreValue gives the LastRestoreAnnotation value of a restore.
func LastRestoreValue(r *snapshotv1.VirtualMachineRestore) string {
	return fmt.Sprintf("%s-%s", r.Name, r.UID)
}

// ClaimName gives the restored claim of a volume whose source claim was
// claim, as KubeVirt's restoreVolumeName: an override's restoreName,
// else per spec.volumeRestorePolicy (PrefixTargetName:
// <target>-<volume>), else restore-<restore UID>-<volume>. InPlace is
// refused (an error naming the field), as is a PrefixTargetName name
// over 63 characters.
func ClaimName(r *snapshotv1.VirtualMachineRestore, volume string) (string, error) {
	for _, o := range r.Spec.VolumeRestoreOverrides {
		if o.VolumeName == volume && o.RestoreName != "" {
			return o.RestoreName, nil
		}
	}
	if p := r.Spec.VolumeRestorePolicy; p != nil {
		switch *p {
		case snapshotv1.VolumeRestorePolicyInPlace:
			return "", fmt.Errorf("spec.volumeRestorePolicy: InPlace is not supported by converge, want RandomizeNames or PrefixTargetName")
		case snapshotv1.VolumeRestorePolicyPrefixTargetName:
			n := r.Spec.Target.Name + "-" + volume
			if len(n) > validation.DNS1035LabelMaxLength {
				return "", fmt.Errorf("spec.volumeRestorePolicy: PrefixTargetName gives %q for volume %s, longer than %d characters", n, volume, validation.DNS1035LabelMaxLength)
			}
			return n, nil
		case snapshotv1.VolumeRestorePolicyRandomizeNames:
		default:
			return "", fmt.Errorf("spec.volumeRestorePolicy: %q, want RandomizeNames, PrefixTargetName or InPlace", *p)
		}
	}
	return fmt.Sprintf("restore-%s-%s", r.UID, volume), nil
}

// ClaimFor gives the claim restoring backup b of the VM src under name
// from the VolumeSnapshot vs, as KubeVirt's
// CreateRestorePVCDefFromVMRestore: the source claim's access modes,
// resources (at least vs's restoreSize), class and volume mode, the
// snapshot as dataSource and dataSourceRef, its labels and annotations
// less the provisioning ones, the restore's labels and annotations and
// the overrides'.
func ClaimFor(r *snapshotv1.VirtualMachineRestore, name string, b snapshotv1.VolumeBackup, vs *snapv1.VolumeSnapshot, src *snapshotv1.VirtualMachine) (*corev1.PersistentVolumeClaim, error) {
	if b.VolumeSnapshotName == nil {
		return nil, fmt.Errorf("volume backup %s has no VolumeSnapshot name", b.VolumeName)
	}
	group := snapv1.GroupName
	s := b.PersistentVolumeClaim.DeepCopy()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: s.Spec.AccessModes, Resources: s.Spec.Resources, StorageClassName: s.Spec.StorageClassName, VolumeMode: s.Spec.VolumeMode,
			DataSource:    &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: *b.VolumeSnapshotName},
			DataSourceRef: &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: *b.VolumeSnapshotName},
		},
	}
	maps.Copy(pvc.Labels, s.Labels)
	for k, v := range s.Annotations {
		drop := false
		for _, p := range droppedAnnotationPrefixes {
			if strings.HasPrefix(k, p) && k != contentTypeAnnotation {
				drop = true
			}
		}
		if !drop {
			pvc.Annotations[k] = v
		}
	}
	if vs.Status != nil && vs.Status.RestoreSize != nil {
		if pvc.Spec.Resources.Requests == nil {
			pvc.Spec.Resources.Requests = corev1.ResourceList{}
		}
		if cur, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || cur.Cmp(*vs.Status.RestoreSize) < 0 {
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = *vs.Status.RestoreSize
		}
	}
	pvc.Labels[SourceNameLabel] = src.Name
	pvc.Labels[SourceNamespaceLabel] = src.Namespace
	pvc.Annotations[NameAnnotation] = r.Name
	pvc.Annotations[LastRestoreAnnotation] = LastRestoreValue(r)
	for _, o := range r.Spec.VolumeRestoreOverrides {
		if o.VolumeName == b.VolumeName {
			maps.Copy(pvc.Labels, o.Labels)
			maps.Copy(pvc.Annotations, o.Annotations)
			break
		}
	}
	return pvc, nil
}

// RestoredVM gives the target's manifest after the restore, as KubeVirt's
// generateRestoredVMSpec: the snapshot VM's spec with each restored
// volume pointing at its claim (a dataVolume volume becomes a
// persistentVolumeClaim volume and its dataVolumeTemplate goes: see the
// package doc), memoryDump volumes dropped, and the
// LastRestoreAnnotation. target nil: a new VM named name in the restore's
// namespace, the snapshot VM's labels and annotations, Halted (running
// false when the snapshot VM used spec.running). Otherwise target's
// metadata, keeping its run strategy.
func RestoredVM(r *snapshotv1.VirtualMachineRestore, snapVM *snapshotv1.VirtualMachine, target *kubevirtv1.VirtualMachine) (*kubevirtv1.VirtualMachine, error) {
	claims := map[string]string{}
	for _, vr := range r.Status.Restores {
		claims[vr.VolumeName] = vr.PersistentVolumeClaimName
	}
	var out *kubevirtv1.VirtualMachine
	if target == nil {
		out = &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: r.Spec.Target.Name, Namespace: r.Namespace,
			Labels: maps.Clone(snapVM.Labels), Annotations: maps.Clone(snapVM.Annotations)}, Spec: *snapVM.Spec.DeepCopy()}
		if out.Spec.Running != nil { //nolint:staticcheck // the legacy field, as KubeVirt
			f := false
			out.Spec.Running = &f //nolint:staticcheck // as KubeVirt
		} else {
			h := kubevirtv1.RunStrategyHalted
			out.Spec.RunStrategy = &h
		}
	} else {
		out = target.DeepCopy()
		out.Spec = *snapVM.Spec.DeepCopy()
		if target.Spec.Running != nil { //nolint:staticcheck // the legacy field, as KubeVirt
			f := false
			out.Spec.Running, out.Spec.RunStrategy = &f, nil //nolint:staticcheck // as KubeVirt
		} else {
			rs, err := target.RunStrategy()
			if err != nil {
				return nil, err
			}
			out.Spec.RunStrategy, out.Spec.Running = &rs, nil //nolint:staticcheck // as KubeVirt
		}
	}
	if out.Spec.Template == nil {
		return nil, fmt.Errorf("the snapshot's VM has no spec.template")
	}
	var templates []kubevirtv1.DataVolumeTemplateSpec
	dropped := map[string]bool{}
	var volumes []kubevirtv1.Volume
	for _, v := range out.Spec.Template.Spec.Volumes {
		if v.MemoryDump != nil {
			continue
		}
		claim, ok := claims[v.Name]
		switch {
		case ok && v.PersistentVolumeClaim != nil:
			v.PersistentVolumeClaim.ClaimName = claim
		case ok && v.DataVolume != nil:
			dropped[v.DataVolume.Name] = true
			v = kubevirtv1.Volume{Name: v.Name, VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}, Hotpluggable: v.DataVolume.Hotpluggable}}}
		}
		volumes = append(volumes, v)
	}
	for _, t := range out.Spec.DataVolumeTemplates {
		if !dropped[t.Name] {
			templates = append(templates, t)
		}
	}
	out.Spec.Template.Spec.Volumes = volumes
	out.Spec.DataVolumeTemplates = templates
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[LastRestoreAnnotation] = LastRestoreValue(r)
	out.Status = kubevirtv1.VirtualMachineStatus{}
	if target != nil {
		out.Status = target.Status
	}
	return out, nil
}

// DeletedDataVolumes gives the DataVolume templates of old that new no
// longer has (KubeVirt's findDatavolumesForDeletion).
func DeletedDataVolumes(old, new []kubevirtv1.DataVolumeTemplateSpec) []string {
	var out []string
	for _, o := range old {
		found := false
		for _, n := range new {
			if o.Name == n.Name {
				found = true
				break
			}
		}
		if !found {
			out = append(out, o.Name)
		}
	}
	return out
}

// Patch applies spec.patches, JSON patch operations of the new VM's
// manifest, to vm (KubeVirt's patchVM); an error names the patches.
func Patch(vm *kubevirtv1.VirtualMachine, patches []string) (*kubevirtv1.VirtualMachine, error) {
	if len(patches) == 0 {
		return vm, nil
	}
	b, err := json.Marshal(vm)
	if err != nil {
		return nil, err
	}
	doc := "[\n" + strings.Join(patches, ",\n") + "\n]"
	p, err := jsonpatch.DecodePatch([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("spec.patches: cannot decode %s: %w", doc, err)
	}
	b, err = p.Apply(b)
	if err != nil {
		return nil, fmt.Errorf("spec.patches: failed to apply %s: %w", doc, err)
	}
	out := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("spec.patches: the patched VM is no VirtualMachine: %w", err)
	}
	return out, nil
}
