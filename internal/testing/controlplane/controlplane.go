// Package controlplane starts a real kube-apiserver and etcd (built from
// Go modules into bin/ by hack/controlplane/build.sh) through
// controller-runtime's envtest, for tests, the demo and benchmarks.
package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// BinDir returns the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS if set, else the bin/ directory of the repository
// containing the working directory.
func BinDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "hack", "controlplane")); err == nil {
				return filepath.Join(dir, "bin"), nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("controlplane: no repository root above the working directory; set KUBEBUILDER_ASSETS")
		}
		dir = parent
	}
}

// Available reports whether bin holds both binaries.
func Available(bin string) bool {
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return false
		}
	}
	return true
}

// Env is a running control plane.
type Env struct {
	*envtest.Environment
	// Config is an admin rest.Config with client-side throttling off.
	Config *rest.Config
}

// Start starts etcd and kube-apiserver from BinDir on loopback, with the
// aggregation layer configured (certAuthn: the front proxy's certificates
// and --requestheader-* flags, so that an aggregated API server learns
// each caller's identity). Stop it with Env.Stop.
func Start() (*Env, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	if !Available(bin) {
		return nil, fmt.Errorf("controlplane: kube-apiserver and etcd not found in %s: run `make bin/kube-apiserver`", bin)
	}
	authn, err := newCertAuthn()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	env.ControlPlane.APIServer = &envtest.APIServer{SecureServing: envtest.SecureServing{Authn: authn}}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("controlplane: starting kube-apiserver and etcd: %w", err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return &Env{Environment: env, Config: cfg}, nil
}

// Kubeconfig writes an admin kubeconfig for the control plane to path.
func (e *Env) Kubeconfig(path string) error {
	u, err := e.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	b, err := u.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
