package datavolume

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// SourceKind gives SourceHTTP for spec.source.http, SourceNone for
// spec.source.blank, SourceUpload for spec.source.upload, or an error
// naming the DataVolume and saying which sources are supported (reason
// ReasonUnsupportedSource). Exactly one of the three must be set.
func SourceKind(dv *cdiv1.DataVolume) (string, error) {
	s := dv.Spec.Source
	n := 0
	if s != nil {
		for _, set := range []bool{s.HTTP != nil, s.Blank != nil, s.Upload != nil} {
			if set {
				n++
			}
		}
	}
	switch {
	case n > 1:
		return "", fmt.Errorf("DataVolume %s/%s: %s; expected exactly one of spec.source.http, spec.source.blank or spec.source.upload", dv.Namespace, dv.Name, setSources(s))
	case s != nil && s.HTTP != nil && s.Blank == nil:
		if s.HTTP.URL == "" {
			return "", fmt.Errorf("DataVolume %s/%s: spec.source.http.url is empty; expected an http:// or https:// URL", dv.Namespace, dv.Name)
		}
		return SourceHTTP, nil
	case s != nil && s.Blank != nil && s.HTTP == nil:
		return SourceNone, nil
	case s != nil && s.Upload != nil:
		return SourceUpload, nil
	case dv.Spec.SourceRef != nil:
		return "", fmt.Errorf("DataVolume %s/%s: spec.sourceRef is not supported; expected spec.source.http, spec.source.blank or spec.source.upload", dv.Namespace, dv.Name)
	default:
		return "", fmt.Errorf("DataVolume %s/%s: expected exactly one of spec.source.http, spec.source.blank or spec.source.upload (other sources are not supported)", dv.Namespace, dv.Name)
	}
}

// setSources names the supported sources set in s ("spec.source.http and
// spec.source.upload are both set").
func setSources(s *cdiv1.DataVolumeSource) string {
	var names []string
	if s.HTTP != nil {
		names = append(names, "spec.source.http")
	}
	if s.Blank != nil {
		names = append(names, "spec.source.blank")
	}
	if s.Upload != nil {
		names = append(names, "spec.source.upload")
	}
	return strings.Join(names, " and ") + " are set"
}

// IsUpload reports whether dv has spec.source.upload (CDI's upload
// DataVolume: the agent's upload server fills it, phases UploadScheduled
// and UploadReady in place of ImportScheduled and ImportInProgress).
func IsUpload(dv *cdiv1.DataVolume) bool {
	return dv.Spec.Source != nil && dv.Spec.Source.Upload != nil
}

// ClaimSpec gives the PVC spec of dv: a copy of spec.pvc, or spec.storage
// with CDI's defaults when it leaves them out (accessModes
// [ReadWriteOnce], volumeMode Filesystem; CDI reads them from the
// StorageProfile, which converge does not have). The size
// (resources.requests.storage) is required; the error names the
// DataVolume and the field.
func ClaimSpec(dv *cdiv1.DataVolume) (corev1.PersistentVolumeClaimSpec, error) {
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
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.Sign() <= 0 {
		f := "spec.pvc"
		if dv.Spec.Storage != nil {
			f = "spec.storage"
		}
		return spec, fmt.Errorf("DataVolume %s/%s: %s.resources.requests.storage is missing; expected a size such as 10Gi", dv.Namespace, dv.Name, f)
	}
	return spec, nil
}

// NewPVC gives the PVC CDI creates for dv: same name and namespace,
// controller-owned by dv, dv's labels, CDI's import annotations (AnnSource,
// AnnEndpoint, AnnSecret, AnnCertConfigMap, AnnContentType,
// AnnCreatedForDataVolume; for an upload AnnUploadRequest="" as CDI's
// upload controller) and the spec of ClaimSpec. Errors (unsupported
// source, no size) name the DataVolume.
func NewPVC(dv *cdiv1.DataVolume) (*corev1.PersistentVolumeClaim, error) {
	kind, err := SourceKind(dv)
	if err != nil {
		return nil, err
	}
	spec, err := ClaimSpec(dv)
	if err != nil {
		return nil, err
	}
	ann := map[string]string{AnnSource: kind, AnnCreatedForDataVolume: string(dv.UID)}
	ct := string(dv.Spec.ContentType)
	if ct == "" {
		ct = string(cdiv1.DataVolumeKubeVirt)
	}
	ann[AnnContentType] = ct
	if kind == SourceUpload {
		ann[AnnUploadRequest] = ""
	}
	if h := dv.Spec.Source.HTTP; h != nil {
		ann[AnnEndpoint] = h.URL
		if h.SecretRef != "" {
			ann[AnnSecret] = h.SecretRef
		}
		if h.CertConfigMap != "" {
			ann[AnnCertConfigMap] = h.CertConfigMap
		}
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
