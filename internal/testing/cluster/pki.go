package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// keyPair is a certificate and its key, parsed and as PEM.
type keyPair struct {
	cert            *x509.Certificate
	key             crypto.Signer
	certPEM, keyPEM []byte
}

// certLifetime is long enough for a cluster left running by `make cluster`.
const certLifetime = 365 * 24 * time.Hour

// pkiFiles are the paths of what writePKI writes under Dir/pki.
type pkiFiles struct {
	dir                                      string
	caCert, caKey                            string
	apiserverCert, apiserverKey              string
	kubeletClientCert, kubeletClientKey      string // apiserver → kubelet
	kubeletServingCert, kubeletServingKey    string
	saKey, saPub                             string
	adminConfig, kubeletConfig               string
	controllerManagerConfig, schedulerConfig string
	proxyConfig                              string
	// the aggregation layer's front proxy (kubeadm's front-proxy-ca and
	// front-proxy-client): kube-apiserver presents the client certificate
	// to aggregated APIs (converge-controller's virt-api), which trust the
	// X-Remote-User headers of requests it signs
	frontProxyCACert, frontProxyClientCert, frontProxyClientKey string
}

// FrontProxyUser is the front proxy's client certificate's common name,
// the one --requestheader-allowed-names admits.
const FrontProxyUser = "front-proxy-client"

// newPKIFiles places the files in dir, but for the admin kubeconfig,
// which is the work directory's "kubeconfig" (dir's parent).
func newPKIFiles(dir string) pkiFiles {
	p := func(n string) string { return filepath.Join(dir, n) }
	return pkiFiles{
		dir:    dir,
		caCert: p("ca.crt"), caKey: p("ca.key"),
		apiserverCert: p("apiserver.crt"), apiserverKey: p("apiserver.key"),
		kubeletClientCert: p("apiserver-kubelet-client.crt"), kubeletClientKey: p("apiserver-kubelet-client.key"),
		kubeletServingCert: p("kubelet.crt"), kubeletServingKey: p("kubelet.key"),
		saKey: p("sa.key"), saPub: p("sa.pub"),
		adminConfig: filepath.Join(filepath.Dir(dir), "kubeconfig"), kubeletConfig: p("kubelet.kubeconfig"),
		controllerManagerConfig: p("controller-manager.kubeconfig"), schedulerConfig: p("scheduler.kubeconfig"),
		proxyConfig:      p("kube-proxy.kubeconfig"),
		frontProxyCACert: p("front-proxy-ca.crt"), frontProxyClientCert: p("front-proxy-client.crt"), frontProxyClientKey: p("front-proxy-client.key"),
	}
}

// writePKI makes the cluster's CA, the serving and client certificates of
// its components, the service account key pair and the kubeconfigs (admin
// as system:masters, the kubelet as system:node:<node>, the controller
// manager, the scheduler and kube-proxy as their system users), all pointing at
// server. The CA is ECDSA P-256 like every key here; it also signs CSRs
// (kube-controller-manager --cluster-signing-*).
func writePKI(f pkiFiles, nodeName, server string) error {
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return err
	}
	now := time.Now()
	ca, err := issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "converge-cluster-ca"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, now)
	if err != nil {
		return err
	}
	serving := func(cn string, hosts ...string) (*keyPair, error) {
		t := &x509.Certificate{
			Subject:     pkix.Name{CommonName: cn},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				t.IPAddresses = append(t.IPAddresses, ip)
			} else {
				t.DNSNames = append(t.DNSNames, h)
			}
		}
		return issue(t, ca, now)
	}
	client := func(cn string, orgs ...string) (*keyPair, error) {
		return issue(&x509.Certificate{
			Subject:     pkix.Name{CommonName: cn, Organization: orgs},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, ca, now)
	}
	apiserver, err := serving("kube-apiserver", NodeIP, KubernetesServiceIP, "127.0.0.1", "localhost",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	if err != nil {
		return err
	}
	kubeletServing, err := serving(nodeName, nodeName, NodeIP)
	if err != nil {
		return err
	}
	kubeletClient, err := client("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	frontProxyCA, err := issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "front-proxy-ca"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, now)
	if err != nil {
		return err
	}
	frontProxyClient, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: FrontProxyUser},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, frontProxyCA, now)
	if err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saKeyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	saPubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER})
	files := map[string][]byte{
		f.caCert: ca.certPEM, f.caKey: ca.keyPEM,
		f.apiserverCert: apiserver.certPEM, f.apiserverKey: apiserver.keyPEM,
		f.kubeletServingCert: kubeletServing.certPEM, f.kubeletServingKey: kubeletServing.keyPEM,
		f.kubeletClientCert: kubeletClient.certPEM, f.kubeletClientKey: kubeletClient.keyPEM,
		f.saKey: saKeyPEM, f.saPub: saPubPEM,
		f.frontProxyCACert: frontProxyCA.certPEM, f.frontProxyClientCert: frontProxyClient.certPEM, f.frontProxyClientKey: frontProxyClient.keyPEM,
	}
	for _, u := range []struct {
		path, cn string
		orgs     []string
	}{
		{f.adminConfig, "converge-cluster-admin", []string{"system:masters"}},
		{f.kubeletConfig, "system:node:" + nodeName, []string{"system:nodes"}},
		{f.controllerManagerConfig, "system:kube-controller-manager", []string{"system:masters"}}, // see controllerManagerArgs,
		{f.schedulerConfig, "system:kube-scheduler", nil},
		{f.proxyConfig, "system:kube-proxy", nil}, // bound to system:node-proxier by default
	} {
		kp, err := client(u.cn, u.orgs...)
		if err != nil {
			return err
		}
		b, err := kubeconfig(server, ca.certPEM, kp)
		if err != nil {
			return err
		}
		files[u.path] = b
	}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// issue makes a new ECDSA P-256 key and a certificate for it from tmpl,
// signed by parent (self-signed when parent is nil), valid from a few
// minutes before now for certLifetime.
func issue(tmpl *x509.Certificate, parent *keyPair, now time.Time) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cluster: generating key for %s: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	tmpl.NotBefore = now.Add(-5 * time.Minute)
	tmpl.NotAfter = now.Add(certLifetime)
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("cluster: signing certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	certPEM, err := cert.EncodeCertificates(c)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: c, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// kubeconfig gives a kubeconfig for server with the CA and kp's client
// certificate embedded.
func kubeconfig(server string, caPEM []byte, kp *keyPair) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["converge-cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.certPEM, ClientKeyData: kp.keyPEM}
	cfg.Contexts["converge-cluster"] = &clientcmdapi.Context{Cluster: "converge-cluster", AuthInfo: "user"}
	cfg.CurrentContext = "converge-cluster"
	return clientcmd.Write(*cfg)
}
