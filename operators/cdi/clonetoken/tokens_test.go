package clonetoken_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/operators/cdi/clonetoken"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

// TestTokens issues clone tokens with the key kept in a real API server
// and checks them: the short token for its clone, its extension bound to
// a UID, and the refusals (another UID, another source, an extension of
// a token for another clone, a token signed by another key).
func TestTokens(t *testing.T) {
	_, c, _ := controlplane.StartEnvForTest(t)
	ctx := context.Background()
	o := uploadtoken.DefaultOptions()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.KeySecret.Namespace}}); err != nil {
		t.Fatal(err)
	}
	tokens := clonetoken.New(c, o)
	cl := clonetoken.Clone{SourceNamespace: "kubevirt-os-images", SourceName: "fedora", TargetNamespace: "vms", TargetName: "root"}
	short, err := tokens.Issue(ctx, cl, clonetoken.Lifetime)
	if err != nil {
		t.Fatal(err)
	}
	withUID := cl
	withUID.TargetUID = "uid-1"
	ext, err := tokens.Extend(ctx, short, withUID)
	if err != nil {
		t.Fatalf("Extend of the webhook's token: %v", err)
	}
	otherSource := withUID
	otherSource.SourceName = "secret"
	otherUID := withUID
	otherUID.TargetUID = "uid-2"

	// a key the cluster never published
	stranger := clonetoken.New(c, uploadtoken.Options{KeySecret: o.KeySecret, PublicKeys: o.PublicKeys, TokenLifetime: o.TokenLifetime})
	foreignOpts := o
	foreignOpts.KeySecret.Name, foreignOpts.PublicKeys.Name = "other-key", "other-keys"
	foreign, err := clonetoken.New(c, foreignOpts).Issue(ctx, cl, clonetoken.Lifetime)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		check func() error
		want  error
	}{
		{"the short token for its clone", func() error { return tokens.Check(ctx, short, cl) }, nil},
		{"the extended token for its clone and UID", func() error { return tokens.Check(ctx, ext, withUID) }, nil},
		{"the extended token checked by another Tokens of the same key", func() error { return stranger.Check(ctx, ext, withUID) }, nil},
		{"the extended token for another UID", func() error { return tokens.Check(ctx, ext, otherUID) }, tokenapi.ErrCloneTokenMismatch},
		{"the short token for another source", func() error { return tokens.Check(ctx, short, otherSource) }, tokenapi.ErrCloneTokenMismatch},
		{"extending a token for another clone", func() error { _, err := tokens.Extend(ctx, short, otherSource); return err }, tokenapi.ErrCloneTokenMismatch},
		{"a token of a key not published here", func() error { return tokens.Check(ctx, foreign, cl) }, tokenapi.ErrSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check()
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}
