package uploadtoken

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
)

// EnsureKeys gives the signing key kept in Secret opts.KeySecret, creating
// the Secret with a new ECDSA P-256 key when absent, and makes sure its
// public key is in ConfigMap opts.PublicKeys (created when absent; other
// keys listed there are kept, so tokens of a replaced key still verify).
// Errors name the Secret or ConfigMap.
func EnsureKeys(ctx context.Context, c client.Client, opts Options) (*ecdsa.PrivateKey, error) {
	sec := &corev1.Secret{}
	err := c.Get(ctx, opts.KeySecret, sec)
	var key *ecdsa.PrivateKey
	switch {
	case apierrors.IsNotFound(err):
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, fmt.Errorf("Secret %s: generating a signing key: %w", opts.KeySecret, err)
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("Secret %s: %w", opts.KeySecret, err)
		}
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opts.KeySecret.Namespace, Name: opts.KeySecret.Name},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{tokenapi.PrivateKeyField: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})}}
		if err := c.Create(ctx, sec); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("Secret %s: creating the upload token signing key: %w", opts.KeySecret, err)
			}
			// another replica won: use its key
			return EnsureKeys(ctx, c, opts)
		}
	case err != nil:
		return nil, fmt.Errorf("Secret %s: reading the upload token signing key: %w", opts.KeySecret, err)
	default:
		blk, _ := pem.Decode(sec.Data[tokenapi.PrivateKeyField])
		if blk == nil || blk.Type != "EC PRIVATE KEY" {
			return nil, fmt.Errorf("Secret %s: field %s: expected a PEM EC PRIVATE KEY", opts.KeySecret, tokenapi.PrivateKeyField)
		}
		if key, err = x509.ParseECPrivateKey(blk.Bytes); err != nil {
			return nil, fmt.Errorf("Secret %s: field %s: %w", opts.KeySecret, tokenapi.PrivateKeyField, err)
		}
	}
	if err := publish(ctx, c, opts.PublicKeys, &key.PublicKey); err != nil {
		return nil, err
	}
	return key, nil
}

// publish appends pub to ConfigMap key's tokenapi.PublicKeysField
// (tokenapi.EncodePublicKey) unless present.
func publish(ctx context.Context, c client.Client, key types.NamespacedName, pub *ecdsa.PublicKey) error {
	block, err := tokenapi.EncodePublicKey(pub)
	if err != nil {
		return fmt.Errorf("ConfigMap %s: %w", key, err)
	}
	cm := &corev1.ConfigMap{}
	err = c.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Data: map[string]string{tokenapi.PublicKeysField: string(block)}}
		if err := c.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("ConfigMap %s: publishing the upload token public key: %w", key, err)
		} else if err == nil {
			return nil
		}
		return publish(ctx, c, key, pub)
	}
	if err != nil {
		return fmt.Errorf("ConfigMap %s: reading the upload token public keys: %w", key, err)
	}
	if bytes.Contains([]byte(cm.Data[tokenapi.PublicKeysField]), block) {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[tokenapi.PublicKeysField] += string(block)
	if err := c.Update(ctx, cm); err != nil {
		return fmt.Errorf("ConfigMap %s: publishing the upload token public key: %w", key, err)
	}
	return nil
}
