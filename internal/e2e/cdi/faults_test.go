package cdi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
)

// TestImporterKilledMidImport is the node-plane fault of issue 17 for
// CDI: the cdi-importer agent is killed in the middle of an import and
// started again.
//
// The agent is the real `converge-node cdi-importer` binary (built with
// go build) run as a process with a kubeconfig of a real kube-apiserver
// and etcd; the DataVolume controller runs in-process and the test binds
// the PVC through the real hostpath driver as newImportEnv does. The
// source is a 16 MiB striped raw image served as qcow2 (with its
// checksum) by a throttled HTTP server (64 KiB every 20 ms); the first
// response stalls after half its body until the agent is dead, so the
// fault falls into the download whatever the machine's load.
//
// Once the server has sent half the image, the DataVolume reports
// ImportInProgress with status.progress above 0 and the importer's
// temporary download file in the volume's data directory holds at least
// a quarter of the image, the agent is killed with SIGKILL (no defer, no
// cleanup, as an OOM kill or a node crash). While no agent runs the
// DataVolume stays ImportInProgress and no disk.img appears. A new agent
// process then resumes from ImportInProgress (importcontroller.Reconcile:
// the import is rerun from the start, there is no resumable download), so
// the server sees a second, complete request; the DataVolume ends
// Succeeded, Ready=True, Running=False Completed, progress 100.0%, and
// disk.img equals the raw image byte for byte. A killed agent is not a
// failed import run: restartCount stays 0 and no ImportFailed Event is
// recorded (the agent counts only the runs it saw fail). The volume's
// data directory holds disk.img alone: the new agent removes the killed
// run's temporary file before it imports again (importer.RemoveStale;
// before that fix it stayed in the volume for good). Timings are logged.
func TestImporterKilledMidImport(t *testing.T) {
	storagetest.RequireTool(t, "qemu-img", "qemu-utils")
	ctrl.SetLogger(logr.Discard())
	bin := vmtest.BuildBinary(t, "./cmd/converge-node")
	e, cp, scheme := newStorageEnv(t)
	c, ctx := e.c, context.Background()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	must(t, cp.Kubeconfig(kubeconfig))
	dvo := datavolume.DefaultOptions()
	dvo.CRDPoll, dvo.SkipNameValidation = 100*time.Millisecond, true
	mctx := controlplane.RunManagerForTest(t, cp, scheme, func(mgr ctrl.Manager) error { return datavolume.Setup(mgr, dvo) })
	go e.provision(t, mctx)

	raw, _, qPath := stripedImage(t, 16<<20, 17)
	qcow2, err := os.ReadFile(qPath)
	must(t, err)
	srv := &stallingServer{body: qcow2, chunk: 64 << 10, pause: 20 * time.Millisecond, release: make(chan struct{})}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.unstall) // before hs.Close: a stalled handler would keep Close waiting

	agentArgs := []string{"cdi-importer", "--kubeconfig", kubeconfig, "--node-name", node,
		"--storage-pool", poolDir + "=" + e.pool.Path, "--upload-bind-address", "",
		"--status-interval", "100ms", "--retries", "2", "--backoff", "50ms", "--max-backoff", "100ms"}
	agent := startImporter(t, bin, dir, 1, agentArgs)
	controlplane.Eventually(t, 60*time.Second, func() bool {
		agent.running(t)
		got := &corev1.Node{}
		return c.Get(ctx, types.NamespacedName{Name: node}, got) == nil && got.Labels[v1alpha1.ImporterNodeLabel] == "true"
	})

	const name = "killed"
	steps := newStepper(t)
	e.createDV(t, name, "16Mi", map[string]any{"http": map[string]any{"url": hs.URL + "/disk.qcow2", "checksum": sha(qcow2)}})
	steps.done("DataVolume created")

	// Mid-import: progress above 0 and a partial download in the volume.
	var dataDir string
	var dv *cdiv1.DataVolume
	var partial string
	var partialSize int64
	steps.wait("import in progress: status.progress > 0, partial download in the volume", func() bool {
		agent.running(t)
		dv = &cdiv1.DataVolume{}
		if srv.sent(0) < int64(len(qcow2)/2) || c.Get(ctx, keyOf(name), dv) != nil ||
			dv.Status.Phase != cdiv1.ImportInProgress || percent(t, dv.Status.Progress) <= 0 {
			return false
		}
		if dataDir == "" {
			dataDir = filepath.Dir(e.diskPath(t, name))
		}
		for _, f := range listDir(t, dataDir) {
			if strings.HasPrefix(f.name, ".disk.img.download-") && f.size >= int64(len(qcow2)/4) {
				partial, partialSize = f.name, f.size
				return true
			}
		}
		return false
	})
	progressAtKill := dv.Status.Progress
	agent.kill(t)
	steps.done(fmt.Sprintf("agent SIGKILLed (progress %s, %s: %d of %d bytes; server sent %d)", progressAtKill, partial, partialSize, len(qcow2), srv.sent(0)))

	// No agent: nothing moves, the killed run's file stays.
	time.Sleep(time.Second)
	dv = e.dv(t, name)
	if dv.Status.Phase != cdiv1.ImportInProgress {
		t.Errorf("with no agent running: phase %s, want ImportInProgress", dv.Status.Phase)
	}
	if _, err := os.Stat(filepath.Join(dataDir, importcontroller.DiskImage)); !os.IsNotExist(err) {
		t.Errorf("disk.img exists after the agent was killed mid-download (stat: %v)", err)
	}
	left := names(listDir(t, dataDir))
	t.Logf("volume data directory after the kill: %v", left)
	srv.unstall()

	agent = startImporter(t, bin, dir, 2, agentArgs)
	steps.done("agent started again")
	steps.wait("DataVolume Succeeded", func() bool {
		agent.running(t)
		dv = &cdiv1.DataVolume{}
		return c.Get(ctx, keyOf(name), dv) == nil && (dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed)
	})
	steps.total("import with the agent killed mid-download")
	if dv.Status.Phase != cdiv1.Succeeded {
		t.Fatalf("phase %s, want Succeeded; conditions %+v; agent log:\n%s", dv.Status.Phase, dv.Status.Conditions, agent.logTail())
	}
	if dv.Status.Progress != "100.0%" {
		t.Errorf("progress %q, want 100.0%%", dv.Status.Progress)
	}
	if dv.Status.RestartCount != 0 {
		t.Errorf("restartCount %d, want 0 (a killed agent is not a failed import run)", dv.Status.RestartCount)
	}
	wantCond(t, dv, cdiv1.DataVolumeReady, corev1.ConditionTrue, "")
	wantCond(t, dv, cdiv1.DataVolumeRunning, corev1.ConditionFalse, dvapi.ReasonCompleted)
	evs := waitEvents(t, c, name, importcontroller.EventImportSucceeded, 1)
	wantEvent(t, evs, corev1.EventTypeNormal, importcontroller.EventImportInProgress, "Import into "+name+" in progress")
	for _, ev := range evs {
		if ev.Reason == importcontroller.ReasonImportFailed {
			t.Errorf("event %s %q after an agent kill, want none", ev.Reason, ev.Message)
		}
	}

	reqs := srv.requests()
	t.Logf("server: %d requests, bytes sent each %v of %d", len(reqs), reqs, len(qcow2))
	if len(reqs) != 2 || reqs[0] >= int64(len(qcow2)) || reqs[1] != int64(len(qcow2)) {
		t.Errorf("server sent %v bytes in %d requests, want a partial first request (the killed run) and one complete second", reqs, len(reqs))
	}

	disk := filepath.Join(dataDir, importcontroller.DiskImage)
	got, err := os.ReadFile(disk)
	must(t, err)
	if !bytes.Equal(got, raw) {
		t.Errorf("%s: %d bytes, %s; want the %d-byte raw image, %s", disk, len(got), sha(got), len(raw), sha(raw))
	}
	if log, _ := os.ReadFile(agent.stderr); !bytes.Contains(log, []byte("removed temporaries of an interrupted import")) || !bytes.Contains(log, []byte(partial)) {
		t.Errorf("the restarted agent's log does not report removing %s:\n%s", partial, agent.logTail())
	}
	if files := names(listDir(t, dataDir)); len(files) != 1 || files[0] != importcontroller.DiskImage {
		t.Errorf("volume data directory %s holds %v, want only %s (the killed run's temporary file removed)", dataDir, files, importcontroller.DiskImage)
	}
}

// stallingServer serves body at every path, chunk bytes every pause; the
// first response stops after half the body until unstall (or until the
// client goes). It records the bytes written per request.
type stallingServer struct {
	body        []byte
	chunk       int
	pause       time.Duration
	release     chan struct{}
	releaseOnce sync.Once
	mu          sync.Mutex
	sentPerReq  []int64
}

func (s *stallingServer) unstall() { s.releaseOnce.Do(func() { close(s.release) }) }

func (s *stallingServer) sent(i int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.sentPerReq) {
		return 0
	}
	return s.sentPerReq[i]
}

func (s *stallingServer) requests() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.sentPerReq...)
}

func (s *stallingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.sentPerReq)
	s.sentPerReq = append(s.sentPerReq, 0)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(s.body)))
	for off := 0; off < len(s.body); off += s.chunk {
		if i == 0 && off >= len(s.body)/2 {
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
		}
		end := min(off+s.chunk, len(s.body))
		n, err := w.Write(s.body[off:end])
		s.mu.Lock()
		s.sentPerReq[i] += int64(n)
		s.mu.Unlock()
		if err != nil {
			return
		}
		w.(http.Flusher).Flush()
		time.Sleep(s.pause)
	}
}

// importerProc is a `converge-node cdi-importer` process.
type importerProc struct {
	cmd    *exec.Cmd
	stderr string
	done   chan struct{}
	err    error
}

// startImporter starts bin with args, its stderr in dir/importer-<n>.log;
// at t's cleanup a process still running gets SIGTERM and must exit 0.
func startImporter(t *testing.T, bin, dir string, n int, args []string) *importerProc {
	t.Helper()
	p := &importerProc{stderr: filepath.Join(dir, fmt.Sprintf("importer-%d.log", n)), done: make(chan struct{})}
	f, err := os.Create(p.stderr)
	must(t, err)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.err != nil {
				t.Errorf("converge-node cdi-importer on SIGTERM: %v; log:\n%s", p.err, p.logTail())
			}
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("converge-node cdi-importer did not stop within 30s of SIGTERM; log:\n%s", p.logTail())
		}
	})
	return p
}

// running fails t if the process has exited.
func (p *importerProc) running(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("converge-node cdi-importer exited: %v; log:\n%s", p.err, p.logTail())
	default:
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *importerProc) kill(t *testing.T) {
	t.Helper()
	must(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("converge-node cdi-importer after SIGKILL: %v, want killed by SIGKILL", p.err)
	}
}

func (p *importerProc) logTail() string {
	b, _ := os.ReadFile(p.stderr)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

type dirEntry struct {
	name string
	size int64
}

func listDir(t *testing.T, dir string) []dirEntry {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must(t, err)
	var out []dirEntry
	for _, d := range ents {
		info, err := d.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, dirEntry{d.Name(), info.Size()})
	}
	return out
}

func names(es []dirEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return out
}

// percent parses a status.progress "NN.NN%" (0 when empty).
func percent(t *testing.T, p cdiv1.DataVolumeProgress) float64 {
	t.Helper()
	if p == "" {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(string(p), "%"), 64)
	if err != nil {
		t.Fatalf("progress %q is not NN.NN%%", p)
	}
	return v
}
