package uploadtoken_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

// TestKeys runs EnsureKeys and the Keeper against a real API server: the
// key is created once and kept, a token it signs verifies with the
// published keys, and a key change (Secret deleted) keeps the old public
// key published so the old token still verifies.
func TestKeys(t *testing.T) {
	_, c, _ := controlplane.StartEnvForTest(t)
	ctx := context.Background()
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "converge-system"}}))

	o := uploadtoken.DefaultOptions()
	k := &uploadtoken.Keeper{Client: c, Options: o}
	key, err := k.Key(ctx)
	must(t, err)
	again, err := uploadtoken.EnsureKeys(ctx, c, o)
	must(t, err)
	if !key.Equal(again) {
		t.Fatal("EnsureKeys made a new key although the Secret exists")
	}
	now := time.Now()
	tok, err := tokenapi.Sign(key, tokenapi.Claims{Operation: tokenapi.OperationUpload, Name: "disk", Namespace: "vms",
		Resource: tokenapi.PVCResource, IssuedAt: now, Expiry: now.Add(o.TokenLifetime)})
	must(t, err)
	keys, err := tokenapi.PublicKeys(ctx, c, o.PublicKeys)
	must(t, err)
	if _, err := tokenapi.Verify(tok, keys, now.Add(time.Minute)); err != nil {
		t.Fatalf("token of the kept key: %v", err)
	}

	must(t, c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.KeySecret.Namespace, Name: o.KeySecret.Name}}))
	if cached, err := k.Key(ctx); err != nil || !cached.Equal(key) {
		t.Fatalf("Keeper.Key after the Secret went: %v; want the cached key", err)
	}
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
	if _, err := tokenapi.Verify(tok, keys, now.Add(time.Minute)); err != nil {
		t.Errorf("token of the old key after a key change: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
