package dataimportcron

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/ociregistry"
)

// registryURL gives the cron's spec.template.spec.source.registry.url,
// "" when its source is no registry URL (CDI's isURLSource).
func registryURL(cron *cdiv1.DataImportCron) string {
	s := cron.Spec.Template.Spec.Source
	if s == nil || s.Registry == nil || s.Registry.URL == nil {
		return ""
	}
	return *s.Registry.URL
}

// Digester asks a registry for the digest of a cron's image, as CDI's
// cdi-source-update-poller does from its CronJob.
type Digester struct {
	// Reader reads the template's secretRef and certConfigMap (uncached:
	// a cache would watch every Secret).
	Reader client.Reader
	// Options gives PollTimeout, Transport and CDI (insecureRegistries).
	Options Options
}

// Digest gives the digest ("sha256:…") of the manifest the cron's
// registry URL names (a HEAD request; for a multi-platform image, its
// index's digest, which the importer resolves to the platform's image).
// It fails on a source that is no docker:// URL, a missing Secret or
// ConfigMap, and a registry error.
func (d Digester) Digest(ctx context.Context, cron *cdiv1.DataImportCron) (string, error) {
	reg := cron.Spec.Template.Spec.Source.Registry
	u, err := dvapi.ParseRegistryURL(registryURL(cron))
	if err != nil {
		return "", err
	}
	if u.Scheme != cdiv1.RegistrySchemeDocker {
		return "", fmt.Errorf("%s: only docker:// sources are polled", registryURL(cron))
	}
	insecure, err := d.insecure(ctx)
	if err != nil {
		return "", err
	}
	ref, err := ociregistry.ParseReference(u.Image, insecure...)
	if err != nil {
		return "", err
	}
	base := d.Options.Transport
	if reg.CertConfigMap != nil {
		if base, err = d.withCA(ctx, cron, *reg.CertConfigMap); err != nil {
			return "", err
		}
	}
	auth := authn.Anonymous
	if reg.SecretRef != nil {
		if auth, err = d.auth(ctx, cron, *reg.SecretRef); err != nil {
			return "", err
		}
	}
	if d.Options.PollTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Options.PollTimeout)
		defer cancel()
	}
	desc, err := remote.Head(ref, remote.WithContext(ctx), remote.WithAuth(auth), remote.WithTransport(ociregistry.Transport(base, insecure)))
	if err != nil {
		return "", fmt.Errorf("polling %s: %w", ref.Name(), err)
	}
	return desc.Digest.String(), nil
}

// insecure gives the CDI CR's spec.config.insecureRegistries.
func (d Digester) insecure(ctx context.Context) ([]string, error) {
	if d.Options.CDI == nil {
		return nil, nil
	}
	cr, err := d.Options.CDI(ctx)
	if err != nil || cr == nil {
		return nil, err
	}
	list, _, _ := unstructured.NestedStringSlice(cr.Object, "spec", "config", "insecureRegistries")
	return list, nil
}

// auth gives the basic auth of the Secret's accessKeyId and secretKey,
// as the importer (nodeplane/cdi/importcontroller) uses them.
func (d Digester) auth(ctx context.Context, cron *cdiv1.DataImportCron, name string) (authn.Authenticator, error) {
	s := &corev1.Secret{}
	if err := d.Reader.Get(ctx, types.NamespacedName{Namespace: cron.Namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("spec.template.spec.source.registry.secretRef: Secret %s/%s: %w", cron.Namespace, name, err)
	}
	return authn.FromConfig(authn.AuthConfig{Username: string(s.Data[dvapi.KeyAccess]), Password: string(s.Data[dvapi.KeySecret])}), nil
}

// withCA gives a copy of the base transport that trusts the PEM CAs of
// the ConfigMap's values instead of the system roots.
func (d Digester) withCA(ctx context.Context, cron *cdiv1.DataImportCron, name string) (http.RoundTripper, error) {
	cm := &corev1.ConfigMap{}
	if err := d.Reader.Get(ctx, types.NamespacedName{Namespace: cron.Namespace, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("spec.template.spec.source.registry.certConfigMap: ConfigMap %s/%s: %w", cron.Namespace, name, err)
	}
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var pem strings.Builder
	for _, k := range keys {
		pem.WriteString(cm.Data[k] + "\n")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(pem.String())) {
		return nil, fmt.Errorf("spec.template.spec.source.registry.certConfigMap: ConfigMap %s/%s holds no PEM certificate", cron.Namespace, name)
	}
	base, ok := d.Options.Transport.(*http.Transport)
	if d.Options.Transport == nil {
		base, ok = remote.DefaultTransport.(*http.Transport)
	}
	if !ok {
		return nil, fmt.Errorf("spec.template.spec.source.registry.certConfigMap: the registry transport is no *http.Transport")
	}
	t := base.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.RootCAs = pool
	return t, nil
}
