package datavolume

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
)

// ClaimSpec gives the PVC spec of dv: a copy of spec.pvc, or spec.storage
// with CDI's defaults when it leaves them out (accessModes
// [ReadWriteOnce], volumeMode Filesystem; CDI reads them from the
// StorageProfile, which converge does not have) and, for a Filesystem
// volume, its size grown by the filesystem overhead (RequiredSpace, as
// CDI's renderPvcSpecVolumeSize; spec.pvc is taken as it is, as CDI
// does). The size (resources.requests.storage) is required except for a
// clone, which gets its source's (the controller fills it, as CDI
// detects a clone's size); the error names the DataVolume and the field.
func ClaimSpec(dv *cdiv1.DataVolume, overhead float64) (corev1.PersistentVolumeClaimSpec, error) {
	var spec corev1.PersistentVolumeClaimSpec
	switch {
	case dv.Spec.PVC != nil && dv.Spec.Storage != nil:
		return spec, fmt.Errorf("DataVolume %s/%s: both spec.pvc and spec.storage are set; expected one", dv.Namespace, dv.Name)
	case dv.Spec.PVC != nil:
		spec = *dv.Spec.PVC.DeepCopy()
	case dv.Spec.Storage != nil:
		s := dv.Spec.Storage.DeepCopy()
		spec = corev1.PersistentVolumeClaimSpec{
			AccessModes: s.AccessModes, Selector: s.Selector, Resources: s.Resources, VolumeName: s.VolumeName,
			StorageClassName: s.StorageClassName, VolumeMode: s.VolumeMode, DataSource: s.DataSource, DataSourceRef: s.DataSourceRef,
		}
		if len(spec.AccessModes) == 0 {
			spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}
		if spec.VolumeMode == nil || *spec.VolumeMode == cdiv1.PersistentVolumeFromStorageProfile {
			fs := corev1.PersistentVolumeFilesystem
			spec.VolumeMode = &fs
		}
	default:
		return spec, fmt.Errorf("DataVolume %s/%s: expected spec.pvc or spec.storage", dv.Namespace, dv.Name)
	}
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; (!ok || q.Sign() <= 0) && dvapi.IsClone(dv) {
		return spec, nil // the source's size, filled by the controller (CDI's clone size detection)
	} else if !ok || q.Sign() <= 0 {
		f := "spec.pvc"
		if dv.Spec.Storage != nil {
			f = "spec.storage"
		}
		return spec, fmt.Errorf("DataVolume %s/%s: %s.resources.requests.storage is missing; expected a size such as 10Gi", dv.Namespace, dv.Name, f)
	}
	if dv.Spec.Storage != nil && *spec.VolumeMode == corev1.PersistentVolumeFilesystem {
		q := spec.Resources.Requests[corev1.ResourceStorage]
		spec.Resources.Requests = spec.Resources.Requests.DeepCopy()
		spec.Resources.Requests[corev1.ResourceStorage] = *resource.NewQuantity(RequiredSpace(overhead, q.Value()), resource.BinarySI)
	}
	return spec, nil
}

// NewPVC gives the PVC CDI creates for dv: same name and namespace,
// controller-owned by dv, dv's labels, CDI's import annotations of
// api/datavolume (AnnSource, AnnEndpoint, AnnSecret, AnnCertConfigMap,
// AnnContentType, AnnCreatedForDataVolume; for a registry source also
// AnnRegistryImportMethod; for an upload AnnUploadRequest="" as CDI's
// upload controller) and the spec of
// ClaimSpec with the filesystem overhead overhead (Overhead). Errors
// (unsupported source, no size) name the DataVolume.
func NewPVC(dv *cdiv1.DataVolume, overhead float64) (*corev1.PersistentVolumeClaim, error) {
	kind, err := dvapi.SourceKind(dv)
	if err != nil {
		return nil, err
	}
	spec, err := ClaimSpec(dv, overhead)
	if err != nil {
		return nil, err
	}
	ann := map[string]string{dvapi.AnnCreatedForDataVolume: string(dv.UID)}
	if kind != dvapi.SourcePVC && kind != dvapi.SourceRef {
		ann[dvapi.AnnSource] = kind // a clone's PVC has AnnCloneRequest instead (NewClonePVC)
	}
	ct := string(dv.Spec.ContentType)
	if ct == "" {
		ct = string(cdiv1.DataVolumeKubeVirt)
	}
	ann[dvapi.AnnContentType] = ct
	if kind == dvapi.SourceUpload {
		ann[dvapi.AnnUploadRequest] = ""
	}
	if h := dv.Spec.Source; h != nil && h.HTTP != nil {
		h := h.HTTP
		ann[dvapi.AnnEndpoint] = h.URL
		if h.SecretRef != "" {
			ann[dvapi.AnnSecret] = h.SecretRef
		}
		if h.CertConfigMap != "" {
			ann[dvapi.AnnCertConfigMap] = h.CertConfigMap
		}
	}
	if dv.Spec.Source != nil && dv.Spec.Source.Registry != nil {
		g := dv.Spec.Source.Registry
		ann[dvapi.AnnEndpoint] = *g.URL
		if g.SecretRef != nil {
			ann[dvapi.AnnSecret] = *g.SecretRef
		}
		if g.CertConfigMap != nil {
			ann[dvapi.AnnCertConfigMap] = *g.CertConfigMap
		}
		method := cdiv1.RegistryPullPod
		if g.PullMethod != nil {
			method = *g.PullMethod
		}
		ann[dvapi.AnnRegistryImportMethod] = string(method)
	}
	labels := map[string]string{}
	for k, v := range dv.Labels {
		labels[k] = v
	}
	t := true
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: dv.Name, Namespace: dv.Namespace, Labels: labels, Annotations: ann,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume", Name: dv.Name, UID: dv.UID,
				Controller: &t, BlockOwnerDeletion: &t,
			}},
		},
		Spec: spec,
	}, nil
}

// NewClonePVC gives the PVC of a clone of source: NewPVC's, annotated
// AnnCloneRequest "namespace/name" as CDI's clone PVCs, with the source's
// size (its bound capacity, else its request) when dv gives none, as CDI
// sizes a clone after its source.
func NewClonePVC(dv *cdiv1.DataVolume, overhead float64, source *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := NewPVC(dv, overhead)
	if err != nil {
		return nil, err
	}
	pvc.Annotations[dvapi.AnnCloneRequest] = source.Namespace + "/" + source.Name
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.Sign() <= 0 {
		size, ok := source.Status.Capacity[corev1.ResourceStorage]
		if !ok || size.Sign() <= 0 {
			size = source.Spec.Resources.Requests[corev1.ResourceStorage]
		}
		if pvc.Spec.Resources.Requests == nil {
			pvc.Spec.Resources.Requests = corev1.ResourceList{}
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = size
	}
	return pvc, nil
}
