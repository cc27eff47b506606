package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/converge-dev/converge/internal/pki"
)

// FrontProxyUser is the common name of the client certificate
// kube-apiserver presents to aggregated API servers
// (--proxy-client-cert-file), the one name --requestheader-allowed-names
// allows, as kubeadm names it.
const FrontProxyUser = "front-proxy-client"

// certAuthn is the test API server's authentication (an envtest.Authn):
// users are client certificates signed by a CA of its own, as envtest's
// default (whose constructor envtest does not export), and the aggregation
// layer is configured as kubeadm configures it, so that an aggregated API
// server (an APIService; k8s.io/apiserver's delegated authentication, as
// converge-controller's virt-api, operators/virt/virtapi) receives each
// caller's identity: kube-apiserver authenticates to it with a front-proxy
// client certificate (--proxy-client-cert-file, --proxy-client-key-file)
// and passes the user in X-Remote-User, X-Remote-Group and
// X-Remote-Extra-* headers, which the aggregated server trusts from
// certificates of the front-proxy CA named FrontProxyUser
// (--requestheader-client-ca-file, --requestheader-allowed-names, read
// from kube-system/extension-apiserver-authentication, which
// kube-apiserver publishes). The files go to the API server's certificate
// directory, which envtest removes at Stop.
type certAuthn struct {
	clientCA, proxyCA, proxyClient *pki.KeyPair
}

// authnLifetime is how long the test CAs and certificates live.
const authnLifetime = 7 * 24 * time.Hour

func newCertAuthn() (*certAuthn, error) {
	now := time.Now()
	clientCA, err := pki.IssueCA("controlplane-client-ca", now, authnLifetime)
	if err != nil {
		return nil, err
	}
	proxyCA, err := pki.IssueCA("controlplane-front-proxy-ca", now, authnLifetime)
	if err != nil {
		return nil, err
	}
	proxyClient, err := pki.IssueClient(proxyCA, FrontProxyUser, nil, now, authnLifetime)
	if err != nil {
		return nil, err
	}
	return &certAuthn{clientCA: clientCA, proxyCA: proxyCA, proxyClient: proxyClient}, nil
}

// Configure writes the CAs and the front proxy's pair to dir and sets
// kube-apiserver's flags.
func (a *certAuthn) Configure(dir string, args *envtest.Arguments) error {
	files := []struct {
		flag, name string
		data       []byte
	}{
		{"client-ca-file", "client-ca.crt", a.clientCA.CertPEM},
		{"requestheader-client-ca-file", "front-proxy-ca.crt", a.proxyCA.CertPEM},
		{"proxy-client-cert-file", "front-proxy-client.crt", a.proxyClient.CertPEM},
		{"proxy-client-key-file", "front-proxy-client.key", a.proxyClient.KeyPEM},
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, 0o600); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
		args.Set(f.flag, path)
	}
	args.Set("requestheader-allowed-names", FrontProxyUser)
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	return nil
}

// Start does nothing: the files are written by Configure.
func (a *certAuthn) Start() error { return nil }

// AddUser gives base authenticating as user with a client certificate.
func (a *certAuthn) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	kp, err := pki.IssueClient(a.clientCA, user.Name, user.Groups, time.Now(), authnLifetime)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = kp.CertPEM, kp.KeyPEM
	return cfg, nil
}

// Stop does nothing: envtest removes the directory.
func (a *certAuthn) Stop() error { return nil }
