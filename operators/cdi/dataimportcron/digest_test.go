package dataimportcron

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// registryCron gives a cron of the registry URL url with the template's
// secretRef and certConfigMap when not empty.
func registryCron(url, secret, cm string) *cdiv1.DataImportCron {
	reg := &cdiv1.DataVolumeSourceRegistry{URL: &url}
	if secret != "" {
		reg.SecretRef = &secret
	}
	if cm != "" {
		reg.CertConfigMap = &cm
	}
	return &cdiv1.DataImportCron{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "golden"},
		Spec: cdiv1.DataImportCronSpec{Template: cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Registry: reg}}}}}
}

func pushRandom(t *testing.T, ref string, opts ...remote.Option) v1.Hash {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return d
}

// TestDigestAuth: a registry on loopback that wants basic auth is polled
// with the secretRef's accessKeyId and secretKey; without them, with a
// missing Secret, or for an oci-archive source the poll fails.
func TestDigestAuth(t *testing.T) {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "poller" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	want := pushRandom(t, host+"/private/disk:1", remote.WithAuth(&authn.Basic{Username: "poller", Password: "s3cret"}))
	reader := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "golden"},
		Data:       map[string][]byte{"accessKeyId": []byte("poller"), "secretKey": []byte("s3cret")},
	}).Build()
	d := Digester{Reader: reader, Options: DefaultOptions()}
	for _, tc := range []struct {
		name, url, secret, err string
	}{
		{"secretRef", "docker://" + host + "/private/disk:1", "creds", ""},
		{"anonymous", "docker://" + host + "/private/disk:1", "", "401 Unauthorized"},
		{"missing Secret", "docker://" + host + "/private/disk:1", "nope", `secretRef: Secret golden/nope`},
		{"oci-archive", "oci-archive:///disks/fedora.tar", "", "only docker:// sources are polled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Digest(context.Background(), registryCron(tc.url, tc.secret, ""))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != want.String() {
				t.Fatalf("%q, %v; want %s", got, err, want)
			}
		})
	}
}

// TestDigestTLS: a registry whose certificate the system does not trust
// is refused, polled with the certConfigMap's CA, or unverified when the
// CDI CR lists it in insecureRegistries. It is named example.com (the
// name httptest's certificate holds) and dialled at the test server.
func TestDigestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	pushT := srv.Client().Transport.(*http.Transport).Clone()
	pushT.DialContext = dial
	want := pushRandom(t, "example.com/tls/disk:1", remote.WithTransport(pushT))
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	reader := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: "golden"}, Data: map[string]string{"ca.pem": ca}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "golden"}, Data: map[string]string{"x": "no PEM"}},
	).Build()
	for _, tc := range []struct {
		name, cm string
		insecure []any
		err      string
	}{
		{"system roots", "", nil, "certificate"},
		{"certConfigMap", "ca", nil, ""},
		{"certConfigMap without PEM", "empty", nil, "holds no PEM certificate"},
		{"insecureRegistries", "", []any{"example.com"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := srv.Client().Transport.(*http.Transport).Clone()
			base.TLSClientConfig.RootCAs = nil // the system roots
			base.DialContext = dial
			o := DefaultOptions()
			o.Transport = base
			o.CDI = func(context.Context) (*unstructured.Unstructured, error) {
				return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"config": map[string]any{"insecureRegistries": tc.insecure}}}}, nil
			}
			got, err := Digester{Reader: reader, Options: o}.Digest(context.Background(), registryCron("docker://example.com/tls/disk:1", "", tc.cm))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != want.String() {
				t.Fatalf("%q, %v; want %s", got, err, want)
			}
		})
	}
}
