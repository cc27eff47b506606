package cdi_test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/cdi/importer"
)

// TestImport drives DataVolumes end to end through the real API server:
// the DataVolume controller makes and places the PVC, the test binds it
// as the provisioner and PV controller would, and the agent imports.
func TestImport(t *testing.T) {
	e := newImportEnv(t)
	raw, qcow2 := storagetest.Images(t)
	srv := &slowServer{files: map[string][]byte{"/disk.qcow2": qcow2, "/disk.raw": raw}, pause: 20 * time.Millisecond}
	url := serve(t, srv)

	t.Run("http qcow2", func(t *testing.T) {
		// Record every progress value while the import runs.
		var mu sync.Mutex
		var seen []string
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				dv := &cdiv1.DataVolume{}
				if e.c.Get(t.Context(), keyOf("fedora"), dv) == nil && dv.Status.Progress != "" {
					mu.Lock()
					if len(seen) == 0 || seen[len(seen)-1] != string(dv.Status.Progress) {
						seen = append(seen, string(dv.Status.Progress))
					}
					mu.Unlock()
				}
			}
		}()
		start := time.Now()
		e.createDV(t, "fedora", "16Mi", map[string]any{"http": map[string]any{"url": url + "/disk.qcow2", "checksum": sha(qcow2)}})
		dv := e.waitPhase(t, "fedora", cdiv1.Succeeded, cdiv1.Failed)
		close(stop)
		t.Logf("qcow2 import of %d bytes: Succeeded after %v; progress seen: %v", len(qcow2), time.Since(start), seen)
		if dv.Status.Phase != cdiv1.Succeeded {
			t.Fatalf("phase %s, want Succeeded; conditions %+v", dv.Status.Phase, dv.Status.Conditions)
		}
		if dv.Status.Progress != "100.0%" {
			t.Errorf("progress %q, want 100.0%%", dv.Status.Progress)
		}
		wantCond(t, dv, cdiv1.DataVolumeReady, corev1.ConditionTrue, "")
		wantCond(t, dv, cdiv1.DataVolumeRunning, corev1.ConditionFalse, dvapi.ReasonCompleted)
		wantCond(t, dv, cdiv1.DataVolumeBound, corev1.ConditionTrue, dvapi.ReasonBound)
		evs := waitEvents(t, e.c, "fedora", importcontroller.EventImportSucceeded, 1)
		wantEvent(t, evs, corev1.EventTypeNormal, importcontroller.EventImportInProgress, "Import into fedora in progress")
		wantEvent(t, evs, corev1.EventTypeNormal, importcontroller.EventImportSucceeded, "Successfully imported into PVC fedora")
		between := false
		for _, p := range seen {
			v, err := strconv.ParseFloat(strings.TrimSuffix(p, "%"), 64)
			if err != nil {
				t.Errorf("progress %q is not NN.NN%%", p)
			}
			if v > 0 && v < 100 {
				between = true
			}
		}
		if !between {
			t.Errorf("no progress strictly between 0%% and 100%% seen: %v", seen)
		}
		disk := e.diskPath(t, "fedora")
		got, err := os.ReadFile(disk)
		must(t, err)
		if len(got) != 16<<20 {
			t.Errorf("%s is %d bytes, want the PVC size %d", disk, len(got), 16<<20)
		}
		if sha(got[:len(raw)]) != sha(raw) || !bytes.Equal(got[len(raw):], make([]byte, len(got)-len(raw))) {
			t.Errorf("%s: first %d bytes differ from the raw image or the rest is not zero", disk, len(raw))
		}
		if a := allocated(t, disk); a >= int64(len(got)) {
			t.Errorf("%s: %d bytes allocated for %d, want sparse", disk, a, len(got))
		}
		pvc := &corev1.PersistentVolumeClaim{}
		must(t, e.c.Get(t.Context(), keyOf("fedora"), pvc))
		if pvc.Annotations[dvapi.AnnEndpoint] != url+"/disk.qcow2" || pvc.Annotations[dvapi.AnnSelectedNode] != node {
			t.Errorf("PVC annotations %v: want the endpoint and selected node %s", pvc.Annotations, node)
		}
	})

	t.Run("blank", func(t *testing.T) {
		e.createDV(t, "scratch", "32Mi", map[string]any{"blank": map[string]any{}})
		dv := e.waitPhase(t, "scratch", cdiv1.Succeeded, cdiv1.Failed)
		if dv.Status.Phase != cdiv1.Succeeded {
			t.Fatalf("phase %s, want Succeeded; conditions %+v", dv.Status.Phase, dv.Status.Conditions)
		}
		disk := e.diskPath(t, "scratch")
		st, err := os.Stat(disk)
		must(t, err)
		if st.Size() != 32<<20 {
			t.Errorf("%s: %d bytes, want %d", disk, st.Size(), 32<<20)
		}
		if a := allocated(t, disk); a != 0 {
			t.Errorf("%s: %d bytes allocated, want a sparse file with none", disk, a)
		}
	})

	failures := []struct {
		name, path, checksum string
		reason               importer.Reason
		restarts             int32
	}{
		// NotFound is rerun (the URL may appear, as CDI's importer pod
		// restarts) Retries=2 times, then Failed.
		{"missing", "/nope.qcow2", "", importer.ReasonNotFound, 2},
		// A checksum mismatch would repeat: Failed at once, nothing written.
		{"tampered", "/disk.raw", sha([]byte("other")), importer.ReasonChecksumMismatch, 0},
		// A raw image larger than the PVC.
		{"toobig", "/disk.raw", "", importer.ReasonTooBig, 0},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			size := "16Mi"
			if tc.reason == importer.ReasonTooBig {
				size = "4Mi"
			}
			src := map[string]any{"url": url + tc.path}
			if tc.checksum != "" {
				src["checksum"] = tc.checksum
			}
			start := time.Now()
			e.createDV(t, tc.name, size, map[string]any{"http": src})
			dv := e.waitPhase(t, tc.name, cdiv1.Succeeded, cdiv1.Failed)
			t.Logf("%s: %s after %v, restartCount %d", tc.name, dv.Status.Phase, time.Since(start), dv.Status.RestartCount)
			if dv.Status.Phase != cdiv1.Failed {
				t.Fatalf("phase %s, want Failed", dv.Status.Phase)
			}
			c := wantCond(t, dv, cdiv1.DataVolumeRunning, corev1.ConditionFalse, string(tc.reason))
			if c != nil && !strings.Contains(c.Message, url+tc.path) {
				t.Errorf("Running message %q does not name the URL", c.Message)
			}
			wantCond(t, dv, cdiv1.DataVolumeReady, corev1.ConditionFalse, string(tc.reason))
			if dv.Status.RestartCount != tc.restarts {
				t.Errorf("restartCount %d, want %d", dv.Status.RestartCount, tc.restarts)
			}
			// One Warning per failed run, naming the PVC, reason and URL.
			evs := waitEvents(t, e.c, tc.name, importcontroller.ReasonImportFailed, int(tc.restarts)+1)
			wantEvent(t, evs, corev1.EventTypeWarning, importcontroller.ReasonImportFailed, "Failed to import into PVC "+tc.name+": "+string(tc.reason)+": ")
			wantEvent(t, evs, corev1.EventTypeWarning, importcontroller.ReasonImportFailed, url+tc.path)
			for _, ev := range evs {
				if ev.Reason == importcontroller.EventImportSucceeded {
					t.Errorf("DataVolume %s failed but has event %s %q", tc.name, ev.Reason, ev.Message)
				}
			}
			if _, err := os.Stat(e.diskPath(t, tc.name)); !os.IsNotExist(err) {
				t.Errorf("disk.img exists after a failed import (stat: %v)", err)
			}
		})
	}
}

// wantEvent checks that evs has an Event of type and reason whose message
// contains msg.
func wantEvent(t *testing.T, evs []corev1.Event, typ, reason, msg string) {
	t.Helper()
	for _, ev := range evs {
		if ev.Type == typ && ev.Reason == reason && strings.Contains(ev.Message, msg) {
			return
		}
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type+" "+ev.Reason+" "+ev.Message)
	}
	t.Errorf("no %s %s event containing %q; events: %q", typ, reason, msg, got)
}

func wantCond(t *testing.T, dv *cdiv1.DataVolume, typ cdiv1.DataVolumeConditionType, status corev1.ConditionStatus, reason string) *cdiv1.DataVolumeCondition {
	t.Helper()
	c := dvapi.FindCondition(dv.Status.Conditions, typ)
	if c == nil {
		t.Errorf("DataVolume %s: no %s condition", dv.Name, typ)
		return nil
	}
	if c.Status != status || c.Reason != reason {
		t.Errorf("DataVolume %s: %s=%s reason %q (%s), want %s reason %q", dv.Name, typ, c.Status, c.Reason, c.Message, status, reason)
	}
	return c
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Stat(path, &st))
	return st.Blocks * 512
}
