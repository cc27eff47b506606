package datavolume

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func TestSourceKind(t *testing.T) {
	url := "docker://quay.io/x"
	for _, tc := range []struct {
		name   string
		source *cdiv1.DataVolumeSource
		ref    bool
		want   string
		upload bool
		err    string
	}{
		{"http", &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://h/i"}}, false, SourceHTTP, false, ""},
		{"blank", &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, false, SourceNone, false, ""},
		{"upload", &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}, false, SourceUpload, true, ""},
		{"http without url", &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{}}, false, "", false, "DataVolume n/d: spec.source.http.url is empty"},
		{"blank and upload", &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}, Upload: &cdiv1.DataVolumeSourceUpload{}}, false, "", true,
			"DataVolume n/d: spec.source.blank and spec.source.upload are set; expected exactly one"},
		{"registry", &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url}}, false, "", false, "(other sources are not supported)"},
		{"sourceRef", nil, true, "", false, "DataVolume n/d: spec.sourceRef is not supported"},
		{"none", nil, false, "", false, "DataVolume n/d: expected exactly one of spec.source.http, spec.source.blank or spec.source.upload"},
	} {
		dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "d"}, Spec: cdiv1.DataVolumeSpec{Source: tc.source}}
		if tc.ref {
			dv.Spec.SourceRef = &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Name: "x"}
		}
		got, err := SourceKind(dv)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: SourceKind = %q, %v; want %q, %q", tc.name, got, err, tc.want, tc.err)
		}
		if IsUpload(dv) != tc.upload {
			t.Errorf("%s: IsUpload = %v, want %v", tc.name, !tc.upload, tc.upload)
		}
	}
}
