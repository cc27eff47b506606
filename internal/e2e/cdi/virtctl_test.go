package cdi_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/testing/virtctltest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/cdi/uploadserver"
	"github.com/converge-dev/converge/operators/cdi/uploadproxy"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

// TestVirtctlImageUpload uploads a qcow2 with the upstream virtctl
// (`virtctl image-upload dv --uploadproxy-url`, virtctltest) into the
// chain of TestUploadChain: virtctl creates the DataVolume, waits for
// UploadReady, gets its token from converge's aggregated API
// upload.cdi.kubevirt.io, probes and streams through converge's upload
// proxy to node-a's upload server, and waits for the PVC's
// cdi.kubevirt.io/storage.pod.phase to read Succeeded, which the
// DataVolume controller keeps; the disk equals the raw image.
func TestVirtctlImageUpload(t *testing.T) {
	virtctltest.Path(t)
	ch := newChain(t, &chainOptions{agent: func(o *importcontroller.Options) {
		uo := uploadserver.DefaultOptions(*o)
		uo.BindAddress, uo.SkipNameValidation = "127.0.0.1:0", true
		uo.Log = testr.New(t)
		o.Setups = append(o.Setups, func(mgr ctrl.Manager) error { return uploadserver.Setup(mgr, uo) })
	}})
	keys := uploadtoken.DefaultOptions()
	startUploadAPI(t, ch.cp, keys)
	proxy, err := uploadproxy.New(uploadproxy.Options{Reader: ch.c, Log: testr.New(t),
		PublicKeys: func(ctx context.Context) ([]*ecdsa.PublicKey, error) {
			return tokenapi.PublicKeys(ctx, ch.c, keys.PublicKeys)
		}})
	must(t, err)
	srv := httptest.NewTLSServer(proxy)
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, ch.cp.Kubeconfig(kubeconfig))

	const size = 16 << 20
	raw, _, qPath := stripedImage(t, size, 5)
	r := virtctltest.Run(t, kubeconfig, "image-upload", "dv", "fromvirtctl", "-n", ns, "--size", "16Mi",
		"--storage-class", scName, "--image-path", qPath, "--uploadproxy-url", srv.URL, "--insecure")
	if r.Code != 0 || !strings.Contains(r.Stdout, "completed successfully") {
		t.Fatalf("virtctl image-upload: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	dv := &cdiv1.DataVolume{}
	must(t, ch.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "fromvirtctl"}, dv))
	if dv.Status.Phase != cdiv1.Succeeded {
		t.Fatalf("DataVolume phase %s after virtctl exited, want Succeeded", dv.Status.Phase)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	must(t, ch.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "fromvirtctl"}, pvc))
	got, err := os.ReadFile(filepath.Join(ch.pool.Path, pvc.Spec.VolumeName, "data", importcontroller.DiskImage))
	must(t, err)
	if !bytes.Equal(got, raw) {
		t.Fatalf("disk: sha %s, want the raw image's %s", sha(got), sha(raw))
	}
}
