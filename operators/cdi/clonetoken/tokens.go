package clonetoken

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

// Lifetimes of clone tokens, CDI's: the webhook's token lives 5 minutes
// (the controller extends it on its first pass), the extended one 10
// years (CDI's newLongTermCloneTokenGenerator).
const (
	// Lifetime is the webhook's token's.
	Lifetime = 5 * time.Minute
	// ExtendedLifetime is the extended token's.
	ExtendedLifetime = 10 * 365 * 24 * time.Hour
)

// Clone names a clone: the source PVC and the target DataVolume (UID
// empty for the short token, which is issued before the DataVolume has
// one).
type Clone struct {
	SourceNamespace, SourceName string
	TargetNamespace, TargetName string
	TargetUID                   string
}

// Tokens issues clone tokens with Keys' signing key and verifies them
// against the public keys it publishes. Use New.
type Tokens struct {
	keys   *uploadtoken.Keeper
	reader client.Reader
	now    func() time.Time
}

// New gives Tokens signing with the key c keeps in opts.KeySecret
// (uploadtoken.Keeper, created when absent) and verifying against the
// ConfigMap opts.PublicKeys read through c (uncached).
func New(c client.Client, opts uploadtoken.Options) *Tokens {
	return &Tokens{keys: &uploadtoken.Keeper{Client: c, Options: opts}, reader: c, now: time.Now}
}

// Issue gives a token for cl valid for lifetime (Lifetime or
// ExtendedLifetime); cl.TargetUID, when set, binds it to that
// DataVolume.
func (t *Tokens) Issue(ctx context.Context, cl Clone, lifetime time.Duration) (string, error) {
	key, err := t.keys.Key(ctx)
	if err != nil {
		return "", err
	}
	now := t.now()
	c := tokenapi.Claims{Operation: tokenapi.OperationClone, Name: cl.SourceName, Namespace: cl.SourceNamespace, Resource: tokenapi.PVCResource,
		Params:   map[string]string{tokenapi.ParamTargetNamespace: cl.TargetNamespace, tokenapi.ParamTargetName: cl.TargetName},
		IssuedAt: now, Expiry: now.Add(lifetime)}
	if cl.TargetUID != "" {
		c.Params[tokenapi.ParamUID] = cl.TargetUID
	}
	s, err := tokenapi.Sign(key, c)
	if err != nil {
		return "", fmt.Errorf("clone token for %s/%s → %s/%s: %w", cl.SourceNamespace, cl.SourceName, cl.TargetNamespace, cl.TargetName, err)
	}
	return s, nil
}

// Check verifies token (signature against the published keys, validity
// now) and that it is for cl (tokenapi.CheckClone); the error says why
// not, prefixed "error verifying token" as CDI's.
func (t *Tokens) Check(ctx context.Context, token string, cl Clone) error {
	keys, err := t.publicKeys(ctx)
	if err != nil {
		return err
	}
	c, err := tokenapi.Verify(token, keys, t.now())
	if err != nil {
		return fmt.Errorf("error verifying token: %w", err)
	}
	return tokenapi.CheckClone(c, cl.SourceNamespace, cl.SourceName, cl.TargetNamespace, cl.TargetName, cl.TargetUID)
}

// Extend checks the short token and gives the extended token of cl (with
// cl.TargetUID), as CDI's ensureExtendedTokenDV.
func (t *Tokens) Extend(ctx context.Context, token string, cl Clone) (string, error) {
	short := cl
	short.TargetUID = ""
	if err := t.Check(ctx, token, short); err != nil {
		return "", err
	}
	return t.Issue(ctx, cl, ExtendedLifetime)
}

// publicKeys gives the published keys, making sure this process's key is
// among them first (a token it just signed verifies).
func (t *Tokens) publicKeys(ctx context.Context) ([]*ecdsa.PublicKey, error) {
	if _, err := t.keys.Key(ctx); err != nil {
		return nil, err
	}
	return tokenapi.PublicKeys(ctx, t.reader, t.keys.Options.PublicKeys)
}
