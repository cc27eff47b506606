package datavolume

import (
	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
)

// PodAnnotations gives the PVC annotations CDI's import and upload
// controllers keep from their pods (pkg/controller/import-controller.go,
// upload-controller.go: AnnPodPhase, AnnPodReady), derived here from the
// DataVolume's phase, which converge's node agents write instead of pods:
// AnnPodPhase Running while importing or taking an upload, Succeeded or
// Failed at the end, nothing before; AnnPodReady, for an upload, "true"
// exactly while UploadReady. virtctl image-upload reads both.
func PodAnnotations(dv *cdiv1.DataVolume) map[string]string {
	out := map[string]string{}
	switch dv.Status.Phase {
	case cdiv1.ImportInProgress, cdiv1.UploadReady, cdiv1.CloneInProgress:
		out[dvapi.AnnPodPhase] = string(corev1.PodRunning)
	case cdiv1.Succeeded:
		out[dvapi.AnnPodPhase] = string(corev1.PodSucceeded)
	case cdiv1.Failed:
		out[dvapi.AnnPodPhase] = string(corev1.PodFailed)
	}
	if dv.Spec.Source != nil && dv.Spec.Source.Upload != nil {
		out[dvapi.AnnPodReady] = "false"
		if dv.Status.Phase == cdiv1.UploadReady {
			out[dvapi.AnnPodReady] = "true"
		}
	}
	return out
}
