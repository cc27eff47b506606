package cdi_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/cli"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/cdi/uploadserver"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

// TestUploadChain runs a DataVolume upload end to end with no stand-in:
// the chain of TestChain (newChain) with converge's aggregated upload API
// (upload.cdi.kubevirt.io, operators/cdi/uploadapi, registered with the
// API server as converge-controller registers it) and the upload server in the cdi-importer agent's process
// (importcontroller.Options.Setups with uploadserver.Setup, as `converge-node
// cdi-importer` does), and the real CLI code path `converge image-upload
// dv` (cli.RunContext) uploading a qcow2 made with qemu-img.
//
// The CLI creates the DataVolume with source upload → the DataVolume
// controller creates the PVC and selects node-a (UploadScheduled) → the
// provisioner creates the volume and its PV → kube-controller-manager
// binds the PVC → the agent marks UploadReady → the CLI gets a token
// from an UploadTokenRequest → uploads to the node → Succeeded, and
// disk.img equals the raw image byte for byte. Each step's latency is
// logged.
func TestUploadChain(t *testing.T) {
	ch := newChain(t, &chainOptions{
		agent: func(o *importcontroller.Options) {
			uo := uploadserver.DefaultOptions(*o)
			uo.BindAddress, uo.CRDPoll, uo.SkipNameValidation = "127.0.0.1:0", 100*time.Millisecond, true
			uo.Log = testr.New(t)
			o.Setups = append(o.Setups, func(mgr ctrl.Manager) error { return uploadserver.Setup(mgr, uo) })
		},
	})
	startUploadAPI(t, ch.cp, uploadtoken.DefaultOptions())
	ctx, c := context.Background(), ch.c
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, ch.cp.Kubeconfig(kubeconfig))

	// A 16 MiB raw image of random stripes and holes, uploaded as qcow2;
	// the PVC has the same size, so the disk must equal it exactly.
	const size = 16 << 20
	raw, _, qPath := stripedImage(t, size, 11)
	qst, err := os.Stat(qPath)
	must(t, err)

	key := types.NamespacedName{Namespace: ns, Name: "uploaded"}
	steps := newStepper(t)
	var stdout, stderr bytes.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- cli.RunContext(ctx, []string{"--kubeconfig", kubeconfig, "image-upload", "dv", key.Name, "-n", key.Namespace,
			"--image-path", qPath, "--size", "16Mi", "--storage-class", scName, "--timeout", "2m"}, &stdout, &stderr)
	}()
	dv := &cdiv1.DataVolume{}
	getDV := func() bool { return c.Get(ctx, key, dv) == nil }
	steps.wait("DataVolume created by `converge image-upload dv`", getDV)
	if dv.Spec.Source == nil || dv.Spec.Source.Upload == nil {
		t.Fatalf("DataVolume %s: source %+v, want upload", key, dv.Spec.Source)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	getPVC := func() bool { return c.Get(ctx, key, pvc) == nil }
	steps.wait("PVC created by the DataVolume controller", getPVC)
	if v, ok := pvc.Annotations[dvapi.AnnUploadRequest]; !ok || v != "" || pvc.Annotations[dvapi.AnnSource] != dvapi.SourceUpload {
		t.Errorf("PVC %s: annotations %v, want %s=\"\" and %s=%s", key, pvc.Annotations, dvapi.AnnUploadRequest, dvapi.AnnSource, dvapi.SourceUpload)
	}
	steps.wait("phase UploadScheduled, node selected", func() bool {
		return getDV() && dv.Status.Phase == cdiv1.UploadScheduled && getPVC() && pvc.Annotations[dvapi.AnnSelectedNode] != ""
	})
	if got := pvc.Annotations[dvapi.AnnSelectedNode]; got != node {
		t.Fatalf("PVC %s: selected node %q, want %s", key, got, node)
	}
	pvName := "pvc-" + string(pvc.UID)
	steps.wait("PV "+pvName+" created by the provisioner", func() bool {
		return c.Get(ctx, types.NamespacedName{Name: pvName}, &corev1.PersistentVolume{}) == nil
	})
	steps.wait("PVC Bound by kube-controller-manager", func() bool {
		return getPVC() && pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName == pvName
	})
	steps.wait("phase UploadReady (the agent's upload server)", func() bool {
		return getDV() && (dv.Status.Phase == cdiv1.UploadReady || dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed)
	})
	if dv.Status.Phase != cdiv1.UploadReady {
		t.Fatalf("DataVolume %s: phase %s right after the PVC bound, want UploadReady", key, dv.Status.Phase)
	}
	steps.wait("DataVolume Succeeded (token from the aggregated API, upload streamed and converted on node-a)", func() bool {
		return getDV() && (dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed)
	})
	if dv.Status.Phase != cdiv1.Succeeded {
		t.Fatalf("DataVolume %s: phase %s, want Succeeded; conditions %+v", key, dv.Status.Phase, dv.Status.Conditions)
	}
	var code int
	select {
	case code = <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("`converge image-upload dv` did not exit after the DataVolume Succeeded")
	}
	steps.done("`converge image-upload dv` exited")
	if code != 0 || !strings.Contains(stdout.String(), "DataVolume "+key.String()+" Succeeded") {
		t.Fatalf("image-upload exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	wantCond(t, dv, cdiv1.DataVolumeReady, corev1.ConditionTrue, "")
	wantCond(t, dv, cdiv1.DataVolumeBound, corev1.ConditionTrue, dvapi.ReasonBound)
	if dv.Status.RestartCount != 0 {
		t.Errorf("DataVolume %s: restartCount %d: the importer touched an upload DataVolume", key, dv.Status.RestartCount)
	}
	disk := filepath.Join(ch.pool.Path, pvName, "data", importcontroller.DiskImage)
	got, err := os.ReadFile(disk)
	must(t, err)
	if !bytes.Equal(got, raw) {
		t.Fatalf("%s: %d bytes, sha %s; want the %d-byte raw image, sha %s", disk, len(got), sha(got), len(raw), sha(raw))
	}
	t.Logf("%s equals the raw image (%d bytes, %d allocated); the qcow2 upload was %d bytes", disk, size, allocated(t, disk), qst.Size())
	steps.total("upload chain")
}
