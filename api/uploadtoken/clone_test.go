package uploadtoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"testing"
	"time"
)

// TestCheckClone signs clone claims, verifies them back (the params
// survive the JWT) and checks them against clones: the one they were
// issued for, and each claim differing.
func TestCheckClone(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	claims := func(uid string) Claims {
		c := Claims{Operation: OperationClone, Name: "fedora", Namespace: "kubevirt-os-images", Resource: PVCResource, IssuedAt: now, Expiry: now.Add(time.Minute),
			Params: map[string]string{ParamTargetNamespace: "vms", ParamTargetName: "root"}}
		if uid != "" {
			c.Params[ParamUID] = uid
		}
		tok, err := Sign(key, c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Verify(tok, []*ecdsa.PublicKey{&key.PublicKey}, now)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	upload := claims("")
	upload.Operation = OperationUpload
	for _, tc := range []struct {
		name                              string
		c                                 Claims
		srcNS, src, targetNS, target, uid string
		wantErr                           bool
	}{
		{"short token, the clone it names", claims(""), "kubevirt-os-images", "fedora", "vms", "root", "u1", false},
		{"extended token, its UID", claims("u1"), "kubevirt-os-images", "fedora", "vms", "root", "u1", false},
		{"extended token, another UID", claims("u1"), "kubevirt-os-images", "fedora", "vms", "root", "u2", true},
		{"another source namespace", claims(""), "secrets", "fedora", "vms", "root", "u1", true},
		{"another source PVC", claims(""), "kubevirt-os-images", "rhel", "vms", "root", "u1", true},
		{"another target namespace", claims(""), "kubevirt-os-images", "fedora", "other", "root", "u1", true},
		{"another target name", claims(""), "kubevirt-os-images", "fedora", "vms", "data", "u1", true},
		{"an upload token", upload, "kubevirt-os-images", "fedora", "vms", "root", "u1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckClone(tc.c, tc.srcNS, tc.src, tc.targetNS, tc.target, tc.uid)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrCloneTokenMismatch)) {
				t.Errorf("CheckClone: %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
