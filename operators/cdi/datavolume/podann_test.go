package datavolume_test

import (
	"maps"
	"testing"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
)

func TestPodAnnotations(t *testing.T) {
	upload := &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}
	http := &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://x/d.img"}}
	for _, tc := range []struct {
		name   string
		source *cdiv1.DataVolumeSource
		phase  cdiv1.DataVolumePhase
		want   map[string]string
	}{
		{"upload scheduled", upload, cdiv1.UploadScheduled, map[string]string{dvapi.AnnPodReady: "false"}},
		{"upload ready", upload, cdiv1.UploadReady, map[string]string{dvapi.AnnPodReady: "true", dvapi.AnnPodPhase: "Running"}},
		{"upload done", upload, cdiv1.Succeeded, map[string]string{dvapi.AnnPodReady: "false", dvapi.AnnPodPhase: "Succeeded"}},
		{"upload failed", upload, cdiv1.Failed, map[string]string{dvapi.AnnPodReady: "false", dvapi.AnnPodPhase: "Failed"}},
		{"import pending", http, cdiv1.ImportScheduled, map[string]string{}},
		{"importing", http, cdiv1.ImportInProgress, map[string]string{dvapi.AnnPodPhase: "Running"}},
		{"imported", http, cdiv1.Succeeded, map[string]string{dvapi.AnnPodPhase: "Succeeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dv := &cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{Source: tc.source}, Status: cdiv1.DataVolumeStatus{Phase: tc.phase}}
			if got := datavolume.PodAnnotations(dv); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
