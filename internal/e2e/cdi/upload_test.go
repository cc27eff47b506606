package cdi_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/nodeclient"
	"github.com/converge-dev/converge/internal/testing/storagetest"
)

// TestUpload uploads a qcow2 image made with qemu-img into an upload
// DataVolume of node-a through the real token issuer and HTTPS server,
// then sends tokens that must be refused, each aimed at a second upload
// DataVolume, and checks its disk image was never created.
func TestUpload(t *testing.T) {
	t0 := time.Now()
	e := newUploadEnv(t)
	t.Logf("environment up in %v", time.Since(t0))
	ctx := context.Background()
	raw, qcow2 := storagetest.Images(t)
	disk := e.uploadDV(t, "disk", node, nil)
	e.waitPhase(t, "disk", cdiv1.UploadReady)
	ep := e.endpoint(t)

	start := time.Now()
	msg, err := nodeclient.Upload(ctx, ep, e.token(t, "disk"), bytes.NewReader(qcow2), int64(len(qcow2)), nodeclient.UploadOptions{})
	must(t, err)
	d := time.Since(start)
	t.Logf("server: %s", msg)
	t.Logf("uploaded %d bytes of qcow2 (8 MiB virtual) in %v: %.1f MB/s of body, %.1f MB/s of raw image",
		len(qcow2), d, float64(len(qcow2))/d.Seconds()/1e6, float64(len(raw))/d.Seconds()/1e6)
	qdir := t.TempDir()
	must(t, os.WriteFile(qdir+"/src.qcow2", qcow2, 0o600))
	qs := time.Now()
	if out, err := exec.Command("qemu-img", "convert", "-f", "qcow2", "-O", "raw", qdir+"/src.qcow2", qdir+"/dst.raw").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	t.Logf("for comparison, local qemu-img convert of the same image in this run: %v (%.1f MB/s of qcow2)", time.Since(qs), float64(len(qcow2))/time.Since(qs).Seconds()/1e6)
	dv := e.waitPhase(t, "disk", cdiv1.Succeeded)
	if dv.Status.Progress != "100.0%" {
		t.Errorf("progress %q, want 100.0%%", dv.Status.Progress)
	}
	got, err := os.ReadFile(disk)
	must(t, err)
	if sha(got) != sha(raw) {
		t.Fatalf("disk.img %s (%d bytes) differs from the raw image %s (%d bytes)", sha(got), len(got), sha(raw), len(raw))
	}
	// a second upload into a Succeeded DataVolume is refused
	if _, err := nodeclient.Upload(ctx, ep, e.token(t, "disk"), bytes.NewReader(qcow2), int64(len(qcow2)), nodeclient.UploadOptions{}); !refused(err, http.StatusConflict) {
		t.Errorf("upload into a Succeeded DataVolume: got %v, want 409", err)
	}

	// refusals, all aimed at "target" (UploadReady on node-a)
	target := e.uploadDV(t, "target", node, nil)
	e.waitPhase(t, "target", cdiv1.UploadReady)
	e.uploadDV(t, "elsewhere", "node-b", nil)
	// node-b's agent would mark it UploadReady; node-a's must still refuse
	must(t, updatePhase(e, "elsewhere", cdiv1.UploadReady))
	e.uploadDV(t, "fromhttp", node, map[string]any{"http": map[string]any{"url": "http://127.0.0.1:1/x.img"}})
	key := e.signingKey(t)
	now := time.Now()
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	sign := func(k *ecdsa.PrivateKey, c tokenapi.Claims) string {
		s, err := tokenapi.Sign(k, c)
		must(t, err)
		return s
	}
	claims := func(name string, op tokenapi.Operation, iat, exp time.Time) tokenapi.Claims {
		return tokenapi.Claims{Operation: op, Name: name, Namespace: ns, Resource: tokenapi.PVCResource, IssuedAt: iat, Expiry: exp}
	}
	valid := claims("target", tokenapi.OperationUpload, now, now.Add(time.Minute))
	for _, tc := range []struct {
		name  string
		token string
		code  int
	}{
		{"missing token", "", http.StatusUnauthorized},
		{"garbage token", "not.a.jwt", http.StatusUnauthorized},
		{"forged (other key)", sign(forger, valid), http.StatusUnauthorized},
		{"expired", sign(key, claims("target", tokenapi.OperationUpload, now.Add(-10*time.Minute), now.Add(-5*time.Minute))), http.StatusUnauthorized},
		{"clone operation", sign(key, claims("target", "Clone", now, now.Add(time.Minute))), http.StatusForbidden},
		{"volume on another node", e.token(t, "elsewhere"), http.StatusForbidden},
		{"DataVolume with an http source", e.token(t, "fromhttp"), http.StatusForbidden},
		{"no such DataVolume", e.token(t, "nothere"), http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nodeclient.Upload(ctx, ep, tc.token, bytes.NewReader(qcow2), int64(len(qcow2)), nodeclient.UploadOptions{})
			if !refused(err, tc.code) {
				t.Fatalf("got %v, want refusal %d", err, tc.code)
			}
			t.Logf("refused: %v", err)
			if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s: want absent after a refused upload, stat: %v", target, err)
			}
			entries, err := os.ReadDir(target[:len(target)-len("/disk.img")])
			must(t, err)
			if len(entries) != 0 {
				t.Fatalf("data directory of target has %d entries after a refused upload, want none", len(entries))
			}
			if p := e.dv(t, "target").Status.Phase; p != cdiv1.UploadReady {
				t.Fatalf("target phase %s after a refused upload, want UploadReady", p)
			}
		})
	}
	t.Logf("refusals done at %v", time.Since(t0))
	// not an image: Failed with the importer's reason, nothing in place
	html := []byte("<!DOCTYPE html><html><body>login</body></html>\n")
	if _, err := nodeclient.Upload(ctx, ep, e.token(t, "target"), bytes.NewReader(html), int64(len(html)), nodeclient.UploadOptions{}); !refused(err, http.StatusBadRequest) {
		t.Fatalf("HTML upload: got %v, want 400", err)
	}
	dv = e.waitPhase(t, "target", cdiv1.Failed)
	if c := findCond(dv, cdiv1.DataVolumeRunning); c == nil || c.Reason != "NotAnImage" {
		t.Errorf("Running condition %+v, want reason NotAnImage", c)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after a failed upload: stat %v, want absent", target, err)
	}
	t.Logf("test body done at %v", time.Since(t0))
}

// TestUploadAsync sends a 64 MiB raw image to upload-async (answered once
// the body is in), waits for Succeeded and compares the bytes; it logs the
// throughput. A client pinning another certificate never sends a byte.
func TestUploadAsync(t *testing.T) {
	e := newUploadEnv(t)
	ctx := context.Background()
	raw := make([]byte, 64<<20)
	for i := 0; i < len(raw); i += 4096 {
		if (i/4096)%4 != 0 {
			raw[i], raw[i+4095] = byte(i>>12), 0xff
		}
	}
	disk := e.uploadDVSize(t, "big", node, "64Mi", nil)
	e.waitPhase(t, "big", cdiv1.UploadReady)
	ep := e.endpoint(t)

	wrong := ep
	wrong.CertSHA256 = otherPin(ep.CertSHA256)
	if _, err := nodeclient.Upload(ctx, wrong, e.token(t, "big"), bytes.NewReader(raw), int64(len(raw)), nodeclient.UploadOptions{}); err == nil {
		t.Fatal("upload to a server whose certificate is not the pinned one: want an error")
	} else {
		t.Logf("wrong pin: %v", err)
	}
	if _, err := os.Stat(disk); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after an upload with a wrong pin: stat %v, want absent", disk, err)
	}

	start := time.Now()
	msg, err := nodeclient.Upload(ctx, ep, e.token(t, "big"), bytes.NewReader(raw), int64(len(raw)), nodeclient.UploadOptions{Async: true})
	must(t, err)
	body := time.Since(start)
	t.Logf("server: %s", msg)
	e.waitPhase(t, "big", cdiv1.Succeeded)
	all := time.Since(start)
	t.Logf("64 MiB raw upload: body accepted in %v (%.1f MB/s), Succeeded after %v (%.1f MB/s end to end, status polling included)",
		body, float64(len(raw))/body.Seconds()/1e6, all, float64(len(raw))/all.Seconds()/1e6)
	got, err := os.ReadFile(disk)
	must(t, err)
	if sha(got) != sha(raw) {
		t.Fatalf("disk.img %s differs from the uploaded raw image %s", sha(got), sha(raw))
	}
}

func updatePhase(e *uploadEnv, name string, p cdiv1.DataVolumePhase) error {
	dv := &cdiv1.DataVolume{}
	if err := e.c.Get(context.Background(), keyOf(name), dv); err != nil {
		return err
	}
	dv.Status.Phase = p
	return e.c.Status().Update(context.Background(), dv)
}

func findCond(dv *cdiv1.DataVolume, ty cdiv1.DataVolumeConditionType) *cdiv1.DataVolumeCondition {
	for i := range dv.Status.Conditions {
		if dv.Status.Conditions[i].Type == ty {
			return &dv.Status.Conditions[i]
		}
	}
	return nil
}

func refused(err error, code int) bool {
	var re *nodeclient.UploadRefusedError
	return errors.As(err, &re) && re.Code == code
}

// signingKey reads the issuer's key from its Secret (the test is admin).
func (e *uploadEnv) signingKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	sec := &corev1.Secret{}
	must(t, e.c.Get(context.Background(), e.uo.KeySecret, sec))
	blk, _ := pem.Decode(sec.Data[tokenapi.PrivateKeyField])
	if blk == nil {
		t.Fatalf("Secret %s: no PEM in %s", e.uo.KeySecret, tokenapi.PrivateKeyField)
	}
	k, err := x509.ParseECPrivateKey(blk.Bytes)
	must(t, err)
	return k
}

// otherPin returns pin with its first hex digit changed, so it never equals
// pin (a fixed prefix would match one certificate in 256).
func otherPin(pin string) string {
	first := "0"
	if pin[0] == '0' {
		first = "1"
	}
	return first + pin[1:]
}
