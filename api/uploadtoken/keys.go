package uploadtoken

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// PrivateKeyField is the Secret data field holding the PEM "EC PRIVATE
	// KEY" that signs tokens.
	PrivateKeyField = "key.pem"
	// PublicKeysField is the ConfigMap data field holding the PEM "PUBLIC
	// KEY" blocks that verify tokens, the signing key's among them.
	PublicKeysField = "keys.pem"
)

// EncodePublicKey gives pub as the PEM "PUBLIC KEY" block (PKIX) the
// issuer appends to PublicKeysField and ParsePublicKeys reads back.
func EncodePublicKey(pub *ecdsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// PublicKeys reads the verification keys from ConfigMap key (field
// PublicKeysField). Errors name the ConfigMap; a ConfigMap without any
// key is an error (the controller has not published yet).
func PublicKeys(ctx context.Context, r client.Reader, key types.NamespacedName) ([]*ecdsa.PublicKey, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, key, cm); err != nil {
		return nil, fmt.Errorf("ConfigMap %s: reading the upload token public keys: %w", key, err)
	}
	keys, err := ParsePublicKeys([]byte(cm.Data[PublicKeysField]))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: field %s: %w", key, PublicKeysField, err)
	}
	return keys, nil
}

// ParsePublicKeys takes concatenated PEM "PUBLIC KEY" blocks of ECDSA
// keys and gives the keys; it fails on another block type or key kind and
// on an empty input.
func ParsePublicKeys(b []byte) ([]*ecdsa.PublicKey, error) {
	var out []*ecdsa.PublicKey
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("PEM block %q: expected PUBLIC KEY", blk.Type)
		}
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, err
		}
		ek, ok := k.(*ecdsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("public key is a %T, expected ECDSA", k)
		}
		out = append(out, ek)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no PEM PUBLIC KEY block")
	}
	return out, nil
}
