package cdi_test

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/testing/guestimage"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/cdi/importer"
)

// TestImportRegistry imports DataVolumes of spec.source.registry through
// the real API server: a containerDisk of the test image (qcow2 under
// /disk/, internal/testing/guestimage) in a registry on loopback, public
// and behind basic auth given by the secretRef's accessKeyId and
// secretKey, as CDI's registry import.
func TestImportRegistry(t *testing.T) {
	e := newImportEnv(t)
	raw, qcow2 := storagetest.Images(t)
	qf := filepath.Join(t.TempDir(), "disk.qcow2")
	must(t, os.WriteFile(qf, qcow2, 0o600))
	cd, err := guestimage.ContainerDisk(qf)
	must(t, err)
	reg := guestimage.StartRegistry(t, "127.0.0.1:0")
	ref, _, err := reg.Push("containerdisks/test", "1", cd)
	must(t, err)

	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	private := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "puller" || p != "pa55" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(private.Close)
	privRef := strings.TrimPrefix(private.URL, "http://") + "/private/test:1"
	pr, err := name.ParseReference(privRef, name.Insecure)
	must(t, err)
	must(t, remote.Write(pr, cd, remote.WithAuth(&authn.Basic{Username: "puller", Password: "pa55"})))
	must(t, e.c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry-creds"},
		Data: map[string][]byte{dvapi.KeyAccess: []byte("puller"), dvapi.KeySecret: []byte("pa55")}}))

	check := func(t *testing.T, name string) {
		t.Helper()
		dv := e.waitPhase(t, name, cdiv1.Succeeded, cdiv1.Failed)
		if dv.Status.Phase != cdiv1.Succeeded {
			t.Fatalf("phase %s, want Succeeded; conditions %+v", dv.Status.Phase, dv.Status.Conditions)
		}
		wantCond(t, dv, cdiv1.DataVolumeRunning, corev1.ConditionFalse, dvapi.ReasonCompleted)
		got, err := os.ReadFile(e.diskPath(t, name))
		must(t, err)
		if len(got) != 16<<20 || !bytes.Equal(got[:len(raw)], raw) || !bytes.Equal(got[len(raw):], make([]byte, len(got)-len(raw))) {
			t.Errorf("disk.img of %s (%d bytes) is not the image's raw disk grown to 16 MiB", name, len(got))
		}
	}
	t.Run("public, pullMethod node", func(t *testing.T) {
		e.createDV(t, "reg", "16Mi", map[string]any{"registry": map[string]any{"url": "docker://" + ref, "pullMethod": "node"}})
		check(t, "reg")
	})
	t.Run("secretRef", func(t *testing.T) {
		e.createDV(t, "priv", "16Mi", map[string]any{"registry": map[string]any{"url": "docker://" + privRef, "secretRef": "registry-creds"}})
		check(t, "priv")
	})
	// The agent reruns a 401 as CDI's importer pod restarts (Retries=2
	// here), then fails the DataVolume naming the URL.
	t.Run("without the secret: HTTPError", func(t *testing.T) {
		e.createDV(t, "anon", "16Mi", map[string]any{"registry": map[string]any{"url": "docker://" + privRef}})
		dv := e.waitPhase(t, "anon", cdiv1.Succeeded, cdiv1.Failed)
		if dv.Status.Phase != cdiv1.Failed || dv.Status.RestartCount != 2 {
			t.Fatalf("phase %s restartCount %d, want Failed after 2 reruns", dv.Status.Phase, dv.Status.RestartCount)
		}
		c := wantCond(t, dv, cdiv1.DataVolumeRunning, corev1.ConditionFalse, string(importer.ReasonHTTPError))
		if c != nil && !strings.Contains(c.Message, "docker://"+privRef) {
			t.Errorf("Running message %q does not name the URL", c.Message)
		}
	})
}
