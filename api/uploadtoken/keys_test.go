package uploadtoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
)

func TestParsePublicKeys(t *testing.T) {
	for _, in := range []string{"", "junk", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"} {
		if _, err := ParsePublicKeys([]byte(in)); err == nil {
			t.Errorf("ParsePublicKeys(%q): want an error", in)
		}
	}
}

// TestEncodePublicKey checks that keys appended to the ConfigMap field as
// the issuer writes them parse back, in order.
func TestEncodePublicKey(t *testing.T) {
	var field []byte
	var want []*ecdsa.PrivateKey
	for range 2 {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		b, err := EncodePublicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		field, want = append(field, b...), append(want, k)
	}
	got, err := ParsePublicKeys(field)
	if err != nil || len(got) != 2 || !got[0].Equal(&want[0].PublicKey) || !got[1].Equal(&want[1].PublicKey) {
		t.Errorf("ParsePublicKeys of two encoded keys: %d keys, %v", len(got), err)
	}
}
