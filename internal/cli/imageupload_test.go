package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/aggregated"
	"github.com/converge-dev/converge/internal/testing/aggregatedtest"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/cdi/uploadserver"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/operators/cdi/uploadapi"
	"github.com/converge-dev/converge/operators/cdi/uploadproxy"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

// TestImageUpload runs `converge image-upload dv` end to end against a real
// API server, converge's aggregated upload API (upload.cdi.kubevirt.io,
// registered with it), the upload proxy and node-a's upload server
// in-process; the
// test plays the DataVolume controller and provisioner for upload sources
// (PVC + hostpath volume + PV, Bound). It checks the non-TTY output and
// that the volume holds the raw image byte for byte.
func TestImageUpload(t *testing.T) {
	storagetest.RequireTool(t, "qemu-img", "qemu-utils")
	cp, _, _ := controlplane.StartEnvForTest(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{Scheme: uploadScheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crdtest.Install(t, c, "datavolumes")
	for _, n := range []string{"vms", "converge-system"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	driver, pool := storagetest.StartDriver(t, "node-a", "local")
	uo := uploadtoken.DefaultOptions()
	aggregatedtest.Start(t, cp, func(c client.Client, _ string) aggregated.API {
		k := &uploadtoken.Keeper{Client: c, Options: uo}
		return uploadapi.API(uploadapi.Options{Key: k.Key, Lifetime: uo.TokenLifetime})
	})
	proxy, err := uploadproxy.New(uploadproxy.Options{Reader: c,
		PublicKeys: func(ctx context.Context) ([]*ecdsa.PublicKey, error) {
			return tokenapi.PublicKeys(ctx, c, uo.PublicKeys)
		}})
	if err != nil {
		t.Fatal(err)
	}
	proxySrv := httptest.NewTLSServer(proxy)
	t.Cleanup(proxySrv.Close)
	vol := importcontroller.DefaultOptions()
	vol.NodeName, vol.Pools = "node-a", []hostpath.Pool{pool}
	o := uploadserver.DefaultOptions(vol)
	o.BindAddress, o.CRDPoll, o.SkipNameValidation = "127.0.0.1:0", 100*time.Millisecond, true
	mctx := controlplane.RunManagerForTest(t, cp, uploadScheme,
		func(mgr ctrl.Manager) error { return uploadserver.Setup(mgr, o) })
	go provisionUpload(t, mctx, c, driver, pool)

	// a 4 MiB image with data in every other 64 KiB block, as qcow2
	dir := t.TempDir()
	raw := make([]byte, 4<<20)
	for i := 0; i < len(raw); i += 128 << 10 {
		copy(raw[i:], bytes.Repeat([]byte{byte(i>>17) + 1}, 64<<10))
	}
	rawPath, qPath := filepath.Join(dir, "img.raw"), filepath.Join(dir, "img.qcow2")
	if err := os.WriteFile(rawPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", rawPath, qPath).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	// straight to the node, and through the upload proxy as virtctl's
	// --uploadproxy-url (its test certificate: --insecure)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"disk", nil},
		{"viaproxy", []string{"--uploadproxy-url", proxySrv.URL, "--insecure"}},
	} {
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := RunContext(ctx, append([]string{"--kubeconfig", kubeconfig, "image-upload", "dv", tc.name, "-n", "vms",
			"--image-path", qPath, "--size", "4Mi", "--timeout", "3m"}, tc.args...), &stdout, &stderr)
		t.Logf("image-upload %s took %v (DataVolume creation to Succeeded)", tc.name, time.Since(start))
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
		}
		got := regexp.MustCompile(`\(\d+ bytes\)`).ReplaceAllString(stdout.String(), "(N bytes)")
		got = regexp.MustCompile(`/\S*/img\.qcow2`).ReplaceAllString(got, "IMG")
		got = strings.ReplaceAll(got, "vms/"+tc.name, "vms/NAME")
		want := `DataVolume vms/NAME created (source upload, 4Mi)
Uploading IMG (N bytes) to DataVolume vms/NAME
 10%
 20%
 30%
 40%
 50%
 60%
 70%
 80%
 90%
100%
Uploaded; waiting for DataVolume vms/NAME to succeed
DataVolume vms/NAME Succeeded
`
		if got != want {
			t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "vms", Name: tc.name}, pvc); err != nil {
			t.Fatal(err)
		}
		disk, err := os.ReadFile(filepath.Join(pool.Path, pvc.Spec.VolumeName, "data", "disk.img"))
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(disk) != sha256.Sum256(raw) {
			t.Errorf("disk.img (%d bytes) differs from the raw image (%d bytes)", len(disk), len(raw))
		}
	}
	var stdout, stderr bytes.Buffer
	// a second run refuses: the DataVolume is Succeeded
	if code := RunContext(ctx, []string{"--kubeconfig", kubeconfig, "image-upload", "dv", "disk", "-n", "vms",
		"--image-path", qPath, "--timeout", "1m"}, &stdout, &stderr); code == 0 || !bytes.Contains(stderr.Bytes(), []byte("phase Succeeded, expected UploadReady")) {
		t.Errorf("second upload: exit %d, stderr %q; want a refusal naming phase Succeeded", code, stderr.String())
	}
}

// provisionUpload plays the DataVolume controller and the provisioner for
// upload DataVolumes: PVC controlled by the DataVolume, volume made by the
// real hostpath driver, PV on node-a, PVC Bound.
func provisionUpload(t *testing.T, ctx context.Context, c client.Client, driver *hostpath.Driver, pool hostpath.Pool) {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		list := &cdiv1.DataVolumeList{}
		if err := c.List(ctx, list); err == nil {
			for i := range list.Items {
				dv := &list.Items[i]
				if seen[string(dv.UID)] || dv.Spec.Storage == nil {
					continue
				}
				seen[string(dv.UID)] = true
				if err := bindUpload(ctx, c, driver, pool, dv); err != nil && ctx.Err() == nil {
					t.Errorf("provisioning DataVolume %s: %v", dv.Name, err)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func bindUpload(ctx context.Context, c client.Client, driver *hostpath.Driver, pool hostpath.Pool, dv *cdiv1.DataVolume) error {
	v := storagetest.Volume{ID: "pvc-" + string(dv.UID), Size: dv.Spec.Storage.Resources.Requests[corev1.ResourceStorage], Pool: pool, Node: "node-a"}
	if err := v.Create(ctx, driver); err != nil {
		return err
	}
	if err := c.Create(ctx, v.PV()); err != nil {
		return err
	}
	pvc := v.DataVolumeClaim(dv.Namespace, dv.Name, dv.UID)
	if err := c.Create(ctx, pvc); err != nil {
		return err
	}
	return storagetest.MarkBound(ctx, c, pvc, v.Size)
}
