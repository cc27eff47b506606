package cdi_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/operators/cdi/uploadproxy"
)

// TestUploadProxy uploads through converge's cdi-uploadproxy, which finds
// the volume's node and streams to that node's real upload server: a
// qcow2 image as the body of /v1beta1/upload and the raw image as the
// "file" part of a /v1beta1/upload-form, each reaching Succeeded with the
// raw image's bytes. Then tokens the proxy must refuse before it reads a
// byte of the body: none, forged, expired, for another operation, for a
// PVC that does not exist; the target stays UploadReady with no disk.
func TestUploadProxy(t *testing.T) {
	e := newUploadEnv(t)
	raw, qcow2 := storagetest.Images(t)
	p, err := uploadproxy.New(uploadproxy.Options{Reader: e.c, Log: testr.New(t),
		PublicKeys: func(ctx context.Context) ([]*ecdsa.PublicKey, error) {
			return tokenapi.PublicKeys(ctx, e.c, e.uo.PublicKeys)
		}})
	must(t, err)
	srv := httptest.NewTLSServer(p)
	t.Cleanup(srv.Close)
	hc := srv.Client()
	post := func(path, token, contentType string, body io.Reader) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, body)
		must(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", contentType)
		resp, err := hc.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if resp, err := hc.Get(srv.URL + uploadproxy.PathHealthz); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET healthz: %v %v", resp, err)
	}

	for _, tc := range []struct {
		name, path string
		body       func() (string, io.Reader)
	}{
		{"body", uploadproxy.PathUpload, func() (string, io.Reader) { return "application/octet-stream", bytes.NewReader(qcow2) }},
		{"form", uploadproxy.PathUploadForm, func() (string, io.Reader) {
			var b bytes.Buffer
			mw := multipart.NewWriter(&b)
			must(t, mw.WriteField("note", "ignored"))
			fw, err := mw.CreateFormFile("file", "disk.img")
			must(t, err)
			_, _ = fw.Write(raw)
			must(t, mw.Close())
			return mw.FormDataContentType(), &b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := e.uploadDV(t, tc.name, node, nil)
			e.waitPhase(t, tc.name, cdiv1.UploadReady)
			e.endpoint(t)
			ct, body := tc.body()
			code, msg := post(tc.path, e.token(t, tc.name), ct, body)
			if code != http.StatusOK {
				t.Fatalf("upload through the proxy: %d %s", code, msg)
			}
			t.Logf("node's answer through the proxy: %s", msg)
			e.waitPhase(t, tc.name, cdiv1.Succeeded)
			got, err := os.ReadFile(disk)
			must(t, err)
			if sha(got) != sha(raw) {
				t.Fatalf("disk.img %s differs from the raw image %s", sha(got), sha(raw))
			}
		})
	}

	target := e.uploadDV(t, "target", node, nil)
	e.waitPhase(t, "target", cdiv1.UploadReady)
	key := e.signingKey(t)
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	now := time.Now()
	sign := func(k *ecdsa.PrivateKey, name string, op tokenapi.Operation, iat, exp time.Time) string {
		s, err := tokenapi.Sign(k, tokenapi.Claims{Operation: op, Name: name, Namespace: ns, Resource: tokenapi.PVCResource, IssuedAt: iat, Expiry: exp})
		must(t, err)
		return s
	}
	for _, tc := range []struct {
		name, token string
		code        int
	}{
		{"no token", "", http.StatusBadRequest},
		{"forged (other key)", sign(forger, "target", tokenapi.OperationUpload, now, now.Add(time.Minute)), http.StatusUnauthorized},
		{"expired", sign(key, "target", tokenapi.OperationUpload, now.Add(-10*time.Minute), now.Add(-5*time.Minute)), http.StatusUnauthorized},
		{"clone operation", sign(key, "target", "Clone", now, now.Add(time.Minute)), http.StatusBadRequest},
		{"no such PVC", sign(key, "nothere", tokenapi.OperationUpload, now, now.Add(time.Minute)), http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := post(uploadproxy.PathUpload, tc.token, "application/octet-stream", bytes.NewReader(qcow2))
			if code != tc.code {
				t.Fatalf("got %d %q, want %d", code, msg, tc.code)
			}
			t.Logf("refused %d: %s", code, msg)
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Fatalf("%s after a refused upload: stat %v, want absent", target, err)
			}
			if p := e.dv(t, "target").Status.Phase; p != cdiv1.UploadReady {
				t.Fatalf("target phase %s after a refused upload, want UploadReady", p)
			}
		})
	}
}
