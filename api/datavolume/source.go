package datavolume

import (
	"fmt"
	"strings"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// supported lists the sources SourceKind accepts, for its messages.
const supported = "spec.source.http, spec.source.registry, spec.source.pvc, spec.source.blank, spec.source.upload or spec.sourceRef"

// SourceKind gives SourceHTTP for spec.source.http, SourceRegistry for
// spec.source.registry, SourceNone for spec.source.blank, SourceUpload
// for spec.source.upload, SourcePVC for spec.source.pvc and SourceRef for
// spec.sourceRef (clones, CheckClone), or an error naming the DataVolume
// and the field and saying which sources are supported (reason
// ReasonUnsupportedSource). Exactly one source must be set, as CDI's
// validateNumberOfSources; a registry source must pass CheckRegistry.
func SourceKind(dv *cdiv1.DataVolume) (string, error) {
	s := dv.Spec.Source
	set := setSources(s)
	switch {
	case len(set) > 0 && dv.Spec.SourceRef != nil:
		return "", fmt.Errorf("DataVolume %s/%s: spec.sourceRef and %s are set; expected exactly one of %s", dv.Namespace, dv.Name, strings.Join(set, " and "), supported)
	case len(set) > 1:
		return "", fmt.Errorf("DataVolume %s/%s: %s are set; expected exactly one of %s", dv.Namespace, dv.Name, strings.Join(set, " and "), supported)
	case len(set) == 0 && dv.Spec.SourceRef != nil:
		if err := CheckClone(dv); err != nil {
			return "", err
		}
		return SourceRef, nil
	case len(set) == 0:
		return "", fmt.Errorf("DataVolume %s/%s: expected exactly one of %s", dv.Namespace, dv.Name, supported)
	}
	switch {
	case s.HTTP != nil:
		if s.HTTP.URL == "" {
			return "", fmt.Errorf("DataVolume %s/%s: spec.source.http.url is empty; expected an http:// or https:// URL", dv.Namespace, dv.Name)
		}
		return SourceHTTP, nil
	case s.Registry != nil:
		if err := CheckRegistry(s.Registry, dv.Spec.ContentType); err != nil {
			return "", fmt.Errorf("DataVolume %s/%s: %w", dv.Namespace, dv.Name, err)
		}
		return SourceRegistry, nil
	case s.PVC != nil:
		if err := CheckClone(dv); err != nil {
			return "", err
		}
		return SourcePVC, nil
	case s.Blank != nil:
		return SourceNone, nil
	case s.Upload != nil:
		return SourceUpload, nil
	}
	return "", fmt.Errorf("DataVolume %s/%s: %s: not supported by converge; expected one of %s", dv.Namespace, dv.Name, set[0], supported)
}

// setSources names the sources set in s, in the order of CDI's
// DataVolumeSource (v1.64).
func setSources(s *cdiv1.DataVolumeSource) []string {
	if s == nil {
		return nil
	}
	var names []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"http", s.HTTP != nil}, {"s3", s.S3 != nil}, {"gcs", s.GCS != nil}, {"registry", s.Registry != nil},
		{"pvc", s.PVC != nil}, {"upload", s.Upload != nil}, {"blank", s.Blank != nil}, {"imageio", s.Imageio != nil},
		{"vddk", s.VDDK != nil}, {"snapshot", s.Snapshot != nil},
	} {
		if f.set {
			names = append(names, "spec.source."+f.name)
		}
	}
	return names
}

// IsUpload reports whether dv has spec.source.upload (CDI's upload
// DataVolume: the agent's upload server fills it, phases UploadScheduled
// and UploadReady in place of ImportScheduled and ImportInProgress).
func IsUpload(dv *cdiv1.DataVolume) bool {
	return dv.Spec.Source != nil && dv.Spec.Source.Upload != nil
}
