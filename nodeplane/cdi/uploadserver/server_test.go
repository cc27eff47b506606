package uploadserver_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/nodeclient"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/cdi/uploadserver"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// TestServer runs node-a's upload role alone against a real API server
// with the DataVolume CRD: the test plays the cluster side through the
// contract only, publishing a verification key where the issuer would
// (api/uploadtoken's layout) and signing tokens with it, and binding the
// upload DataVolume's PVC to a volume the real hostpath driver made.
// (internal/e2e/cdi runs the real token issuer and DataVolume controller
// with it.) It checks that the ReadyMarker marks the DataVolume
// UploadReady and the server publishes its endpoint; that tokens signed
// by another key, expired, for another operation or for another node's
// volume are refused with nothing written; and that a raw image with a
// valid token lands in disk.img and the DataVolume Succeeded.
func TestServer(t *testing.T) {
	storagetest.RequireTool(t, "qemu-img", "qemu-utils")
	cp, c, scheme := controlplane.StartEnvForTest(t, cdiv1.AddToScheme)
	ctx := context.Background()
	crdtest.Install(t, c, "datavolumes")
	keys := uploadtoken.DefaultPublicKeys()
	for _, n := range []string{"vms", keys.Namespace} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	must(t, c.Create(ctx, n))
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	must(t, c.Status().Update(ctx, n))

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	pub, err := uploadtoken.EncodePublicKey(&key.PublicKey)
	must(t, err)
	must(t, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: keys.Namespace, Name: keys.Name},
		Data: map[string]string{uploadtoken.PublicKeysField: string(pub)}}))

	driver, pool := storagetest.StartDriver(t, "node-a", "local")
	vol := importcontroller.DefaultOptions()
	vol.NodeName, vol.Pools = "node-a", []hostpath.Pool{pool}
	o := uploadserver.DefaultOptions(vol)
	o.BindAddress, o.CRDPoll, o.SkipNameValidation = "127.0.0.1:0", 100*time.Millisecond, true
	o.Log = testr.New(t)
	controlplane.RunManagerForTest(t, cp, scheme, func(mgr ctrl.Manager) error { return uploadserver.Setup(mgr, o) })

	// upload DataVolumes on node-a and node-b, PVCs Bound as the DataVolume
	// controller, provisioner and PV controller would leave them
	upload := func(name, nodeName string) string {
		t.Helper()
		dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: name}, Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")}}}}}
		must(t, c.Create(ctx, dv))
		v := storagetest.Volume{ID: "pvc-" + string(dv.UID), Size: resource.MustParse("8Mi"), Pool: pool, Node: nodeName}
		if nodeName == "node-a" {
			must(t, v.Create(ctx, driver))
		}
		must(t, c.Create(ctx, v.PV()))
		pvc := v.DataVolumeClaim("vms", name, dv.UID)
		must(t, c.Create(ctx, pvc))
		must(t, storagetest.MarkBound(ctx, c, pvc, v.Size))
		return filepath.Join(pool.Path, v.ID, "data", "disk.img")
	}
	phase := func(name string) cdiv1.DataVolumePhase {
		dv := &cdiv1.DataVolume{}
		must(t, c.Get(ctx, client.ObjectKey{Namespace: "vms", Name: name}, dv))
		return dv.Status.Phase
	}
	disk := upload("disk", "node-a")
	upload("elsewhere", "node-b")
	controlplane.Eventually(t, 30*time.Second, func() bool { return phase("disk") == cdiv1.UploadReady })
	elsewhere := &cdiv1.DataVolume{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: "vms", Name: "elsewhere"}, elsewhere))
	if elsewhere.Status.Phase == cdiv1.UploadReady {
		t.Errorf("node-a's ReadyMarker marked node-b's DataVolume %s", elsewhere.Status.Phase)
	}
	// node-b's agent would mark it UploadReady; node-a's must still refuse
	elsewhere.Status.Phase = cdiv1.UploadReady
	must(t, c.Status().Update(ctx, elsewhere))
	var ep nodeendpoint.Endpoint
	controlplane.Eventually(t, 30*time.Second, func() bool {
		node := &corev1.Node{}
		if c.Get(ctx, client.ObjectKey{Name: "node-a"}, node) != nil {
			return false
		}
		ep, err = nodeendpoint.Upload.FromNode(node)
		return err == nil
	})

	raw, _ := storagetest.Images(t)
	now := time.Now()
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	sign := func(k *ecdsa.PrivateKey, name string, op uploadtoken.Operation, exp time.Time) string {
		s, err := uploadtoken.Sign(k, uploadtoken.Claims{Operation: op, Name: name, Namespace: "vms", Resource: uploadtoken.PVCResource,
			IssuedAt: exp.Add(-5 * time.Minute), Expiry: exp})
		must(t, err)
		return s
	}
	post := func(token string) error {
		_, err := nodeclient.Upload(ctx, ep, token, bytes.NewReader(raw), int64(len(raw)), nodeclient.UploadOptions{})
		return err
	}
	for _, tc := range []struct {
		name, token string
		code        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"another key", sign(other, "disk", uploadtoken.OperationUpload, now.Add(time.Minute)), http.StatusUnauthorized},
		{"expired", sign(key, "disk", uploadtoken.OperationUpload, now.Add(-time.Minute)), http.StatusUnauthorized},
		{"clone operation", sign(key, "disk", "Clone", now.Add(time.Minute)), http.StatusForbidden},
		{"volume of node-b", sign(key, "elsewhere", uploadtoken.OperationUpload, now.Add(time.Minute)), http.StatusForbidden},
		{"no such DataVolume", sign(key, "ghost", uploadtoken.OperationUpload, now.Add(time.Minute)), http.StatusNotFound},
	} {
		var re *nodeclient.UploadRefusedError
		if err := post(tc.token); !errors.As(err, &re) || re.Code != tc.code {
			t.Errorf("%s: %v, want refusal %d", tc.name, err, tc.code)
		}
		if _, err := os.Stat(disk); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: %s after a refused upload: stat %v, want absent", tc.name, disk, err)
		}
	}
	if p := phase("disk"); p != cdiv1.UploadReady {
		t.Fatalf("phase %s after refused uploads, want UploadReady", p)
	}

	must(t, post(sign(key, "disk", uploadtoken.OperationUpload, now.Add(time.Minute))))
	if p := phase("disk"); p != cdiv1.Succeeded {
		t.Errorf("phase %s after the upload, want Succeeded", p)
	}
	got, err := os.ReadFile(disk)
	must(t, err)
	if !bytes.Equal(got, raw) {
		t.Errorf("disk.img (%d bytes) differs from the uploaded raw image (%d bytes)", len(got), len(raw))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
