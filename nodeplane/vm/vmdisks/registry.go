package vmdisks

import (
	"bytes"
	"fmt"

	"github.com/docker/cli/cli/config/configfile"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/internal/ociregistry"
)

// parseReference parses a containerDisk image reference
// (ociregistry.ParseReference: Docker Hub when it names no registry,
// plain HTTP allowed for a loopback registry).
func parseReference(image string) (name.Reference, error) { return ociregistry.ParseReference(image) }

// anonymous is the keychain of a containerDisk without imagePullSecret.
type anonymous struct{}

func (anonymous) Resolve(authn.Resource) (authn.Authenticator, error) { return authn.Anonymous, nil }

// pullSecretKeychain gives the credentials of an image pull Secret's
// data: .dockerconfigjson (kubernetes.io/dockerconfigjson) or .dockercfg
// (kubernetes.io/dockercfg), read by Docker's own config file code
// (github.com/docker/cli), which matches a registry by host name.
func pullSecretKeychain(data map[string][]byte) (authn.Keychain, error) {
	cf := configfile.New("")
	if raw, ok := data[corev1.DockerConfigJsonKey]; ok {
		if err := cf.LoadFromReader(bytes.NewReader(raw)); err != nil {
			return nil, fmt.Errorf("key %s: %w", corev1.DockerConfigJsonKey, err)
		}
	} else if raw, ok := data[corev1.DockerConfigKey]; ok {
		// .dockercfg is the "auths" map of .dockerconfigjson alone
		wrapped := append(append([]byte(`{"auths":`), raw...), '}')
		if err := cf.LoadFromReader(bytes.NewReader(wrapped)); err != nil {
			return nil, fmt.Errorf("key %s: %w", corev1.DockerConfigKey, err)
		}
	} else {
		return nil, fmt.Errorf("no key %s or %s: expected a kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg Secret", corev1.DockerConfigJsonKey, corev1.DockerConfigKey)
	}
	return configKeychain{cf}, nil
}

type configKeychain struct{ cf *configfile.ConfigFile }

// Resolve gives the credentials for r's registry, anonymous when the
// config has none; Docker Hub's key is https://index.docker.io/v1/, as in
// go-containerregistry's default keychain.
func (k configKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	key := r.RegistryStr()
	if key == name.DefaultRegistry {
		key = authn.DefaultAuthKey
	}
	ac, err := k.cf.GetAuthConfig(key)
	if err != nil {
		return nil, err
	}
	cfg := authn.AuthConfig{Username: ac.Username, Password: ac.Password, Auth: ac.Auth, IdentityToken: ac.IdentityToken, RegistryToken: ac.RegistryToken}
	if cfg == (authn.AuthConfig{}) {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(cfg), nil
}
