package uploadtoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

func TestVerify(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	old, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	c := Claims{Operation: OperationUpload, Name: "disk", Namespace: "vms", Resource: PVCResource, IssuedAt: now, Expiry: now.Add(5 * time.Minute)}
	sign := func(k *ecdsa.PrivateKey, c Claims) string {
		s, err := Sign(k, c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hmac, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	hs, _ := jwt.Signed(hmac).Claims(jwt.Claims{Issuer: TokenIssuer, Expiry: jwt.NewNumericDate(now.Add(time.Minute))}).Claims(c).Serialize()
	published := []*ecdsa.PublicKey{&key.PublicKey, &old.PublicKey}
	for _, tc := range []struct {
		name  string
		token string
		at    time.Time
		want  error
	}{
		{"valid", sign(key, c), now.Add(time.Minute), nil},
		{"signed by an older published key", sign(old, c), now, nil},
		{"forged: another key", sign(other, c), now, ErrSignature},
		{"expired", sign(key, c), now.Add(6 * time.Minute), ErrExpired},
		{"not yet valid", sign(key, c), now.Add(-time.Minute), ErrExpired},
		{"HS256", hs, now, ErrMalformed},
		{"garbage", "a.b.c", now, ErrMalformed},
		{"tampered payload", tamper(sign(key, c)), now, ErrSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Verify(tc.token, published, tc.at)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
			if err == nil && (got.Name != "disk" || got.Namespace != "vms" || got.Operation != OperationUpload || got.Resource != PVCResource || !got.Expiry.Equal(c.Expiry)) {
				t.Errorf("claims %+v, want %+v", got, c)
			}
		})
	}
	if _, err := Sign(key, Claims{IssuedAt: now, Expiry: now}); err == nil {
		t.Error("Sign with expiry == issue time: want an error")
	}
}

// tamper swaps the payload of a compact JWS for one naming another PVC.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	forged, _ := Sign(other, Claims{Operation: OperationUpload, Name: "victim", Namespace: "vms", Resource: PVCResource, IssuedAt: now, Expiry: now.Add(time.Hour)})
	parts[1] = strings.Split(forged, ".")[1]
	return strings.Join(parts, ".")
}
