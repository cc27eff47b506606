package importcontroller

import (
	"k8s.io/client-go/tools/record"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// EventSource is the component of the core/v1 Events the agent records on
// DataVolumes.
const EventSource = "cdi-importer"

// Event reasons recorded on the DataVolume, with CDI's import controller's
// names and messages (pkg/controller/datavolume/import-controller.go):
// Normal ImportInProgress "Import into NAME in progress" when a run starts
// after another phase (not on reruns), Normal ImportSucceeded "Successfully imported into
// PVC NAME", and Warning ImportFailed (ReasonImportFailed) "Failed to
// import into PVC NAME: REASON: ERROR" after every failed run, the
// importer's reason and error appended (CDI puts them in the condition
// only).
const (
	EventImportInProgress = "ImportInProgress"
	EventImportSucceeded  = "ImportSucceeded"
)

// event records one Event on dv when the recorder is set.
func event(rec record.EventRecorder, dv *cdiv1.DataVolume, typ, reason, format string, args ...any) {
	if rec == nil || dv == nil {
		return
	}
	rec.Eventf(dv, typ, reason, format, args...)
}
