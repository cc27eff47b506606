package uploadtoken_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	uploadv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

// TestIssuer runs the Issuer against a real API server with the generated
// UploadTokenRequest CRD: keys are created once and kept, a request gets a
// token that verifies with the published keys and names its PVC, a key
// change keeps the old public key published, and a request is deleted
// once its token has expired plus GCAfterExpiry (fake clock).
func TestIssuer(t *testing.T) {
	_, c, _ := controlplane.StartEnvForTest(t, uploadv1.AddToScheme)
	ctx := context.Background()
	crdtest.Install(t, c, "uploadtokenrequests")
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "converge-system"}}))
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vms"}}))

	o := uploadtoken.DefaultOptions()
	key, err := uploadtoken.EnsureKeys(ctx, c, o)
	must(t, err)
	again, err := uploadtoken.EnsureKeys(ctx, c, o)
	must(t, err)
	if !key.Equal(again) {
		t.Fatal("EnsureKeys made a new key although the Secret exists")
	}

	utr := &uploadv1.UploadTokenRequest{ObjectMeta: metav1.ObjectMeta{Name: "req", Namespace: "vms"},
		Spec: uploadv1.UploadTokenRequestSpec{PvcName: "disk"}, Status: uploadv1.UploadTokenRequestStatus{Token: "user-supplied"}}
	must(t, c.Create(ctx, utr))
	must(t, c.Get(ctx, client.ObjectKeyFromObject(utr), utr))
	if utr.Status.Token != "" {
		t.Fatalf("status.token %q set on create; the status subresource must drop it", utr.Status.Token)
	}
	created := utr.CreationTimestamp.Time
	clock := created
	o.Now = func() time.Time { return clock }
	r := &uploadtoken.Issuer{Client: c, Key: key, Options: o}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(utr)})
	must(t, err)
	if want := o.TokenLifetime + o.GCAfterExpiry; res.RequeueAfter != want {
		t.Errorf("RequeueAfter %v, want %v", res.RequeueAfter, want)
	}
	must(t, c.Get(ctx, client.ObjectKeyFromObject(utr), utr))
	keys, err := tokenapi.PublicKeys(ctx, c, o.PublicKeys)
	must(t, err)
	claims, err := tokenapi.Verify(utr.Status.Token, keys, clock.Add(time.Minute))
	must(t, err)
	if claims.Name != "disk" || claims.Namespace != "vms" || claims.Operation != tokenapi.OperationUpload || claims.Expiry.Sub(clock) != o.TokenLifetime {
		t.Errorf("claims %+v: want disk in vms, Upload, expiring after %v", claims, o.TokenLifetime)
	}

	// a new key (Secret deleted) is published next to the old one
	must(t, c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.KeySecret.Namespace, Name: o.KeySecret.Name}}))
	newKey, err := uploadtoken.EnsureKeys(ctx, c, o)
	must(t, err)
	if newKey.Equal(key) {
		t.Fatal("EnsureKeys without a Secret kept the old key")
	}
	keys, err = tokenapi.PublicKeys(ctx, c, o.PublicKeys)
	must(t, err)
	if len(keys) != 2 {
		t.Fatalf("%d published keys after a key change, want 2", len(keys))
	}
	if _, err := tokenapi.Verify(utr.Status.Token, keys, clock.Add(time.Minute)); err != nil {
		t.Errorf("token of the old key after a key change: %v", err)
	}

	// one second before collection the request stays; at collection it goes
	clock = created.Add(o.TokenLifetime + o.GCAfterExpiry - time.Second)
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(utr)})
	must(t, err)
	must(t, c.Get(ctx, client.ObjectKeyFromObject(utr), utr))
	clock = created.Add(o.TokenLifetime + o.GCAfterExpiry)
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(utr)})
	must(t, err)
	if err := c.Get(ctx, client.ObjectKeyFromObject(utr), utr); !apierrors.IsNotFound(err) {
		t.Errorf("request after its collection time: %v, want NotFound", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
