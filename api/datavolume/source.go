package datavolume

import (
	"fmt"
	"strings"

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
