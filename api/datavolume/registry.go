package datavolume

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Registry source keys of the Secret spec.source.registry.secretRef
// names, CDI's KeyAccess and KeySecret (pkg/common/common.go): the
// cdi-importer uses them as the registry's basic auth user and password.
const (
	KeyAccess = "accessKeyId"
	KeySecret = "secretKey"
)

// RegistryURL is a parsed spec.source.registry.url.
type RegistryURL struct {
	// Scheme is cdiv1.RegistrySchemeDocker or cdiv1.RegistrySchemeOci.
	Scheme string
	// Image is the image reference of a docker:// URL
	// ("host/repository:tag" or "@sha256:..."); Archive the path of an
	// oci-archive:// URL with its leading slashes removed (relative to
	// the node's OCI archive directory).
	Image, Archive string
}

// ParseRegistryURL parses a registry source URL as CDI's importer does
// (pkg/image/transport.go parseImageName: the scheme before the first
// colon, docker or oci-archive, then the transport's reference; CDI's
// webhook validateDataVolumeSourceRegistry allows these two schemes
// only). A docker reference must parse as an image reference
// (go-containerregistry's name.ParseReference, Docker Hub when it names
// no registry); an oci-archive path must name a file.
func ParseRegistryURL(u string) (RegistryURL, error) {
	scheme, rest, ok := strings.Cut(u, "://")
	switch {
	case !ok:
		return RegistryURL{}, fmt.Errorf("%q: expected docker://HOST/REPOSITORY:TAG or oci-archive://PATH", u)
	case scheme == cdiv1.RegistrySchemeDocker:
		if _, err := name.ParseReference(rest); err != nil {
			return RegistryURL{}, fmt.Errorf("%q: %w", u, err)
		}
		return RegistryURL{Scheme: scheme, Image: rest}, nil
	case scheme == cdiv1.RegistrySchemeOci:
		p := strings.TrimLeft(rest, "/")
		if p == "" || strings.HasSuffix(p, "/") {
			return RegistryURL{}, fmt.Errorf("%q: expected oci-archive://PATH of an OCI archive file", u)
		}
		return RegistryURL{Scheme: scheme, Archive: p}, nil
	}
	return RegistryURL{}, fmt.Errorf("%q: scheme %q is not docker or oci-archive (CDI's registry schemes)", u, scheme)
}

// CheckRegistry gives the first error of a registry source with content
// type ct, naming the field under spec: CDI's webhook rules
// (validateRegistrySource: content type kubevirt; exactly one of url and
// imageStream; pullMethod pod or node) and converge's: the URL parses
// (ParseRegistryURL), and imageStream (OpenShift's image streams, CDI
// pulls them through the node's container runtime) is not supported.
// pullMethod node is served as pod: the cdi-importer pulls the image
// itself in both cases.
func CheckRegistry(r *cdiv1.DataVolumeSourceRegistry, ct cdiv1.DataVolumeContentType) error {
	switch {
	case ct != "" && ct != cdiv1.DataVolumeKubeVirt:
		return fmt.Errorf("spec.contentType %q: ContentType must be kubevirt when Source is Registry", ct)
	case r.URL != nil && r.ImageStream != nil:
		return fmt.Errorf("spec.source.registry: both url and imageStream are set; Source registry should have either URL or ImageStream")
	case r.ImageStream != nil:
		return fmt.Errorf("spec.source.registry.imageStream: OpenShift image streams are not supported by converge; expected spec.source.registry.url (docker://HOST/REPOSITORY:TAG)")
	case r.URL == nil:
		return fmt.Errorf("spec.source.registry.url: missing; Source registry should have either URL or ImageStream")
	}
	if _, err := ParseRegistryURL(*r.URL); err != nil {
		return fmt.Errorf("spec.source.registry.url: %w", err)
	}
	if m := r.PullMethod; m != nil && *m != cdiv1.RegistryPullPod && *m != cdiv1.RegistryPullNode {
		return fmt.Errorf("spec.source.registry.pullMethod %q: expected %s or %s", *m, cdiv1.RegistryPullPod, cdiv1.RegistryPullNode)
	}
	if r.SecretRef != nil && *r.SecretRef == "" {
		return fmt.Errorf("spec.source.registry.secretRef: empty; expected the name of a Secret with %s and %s", KeyAccess, KeySecret)
	}
	if r.CertConfigMap != nil && *r.CertConfigMap == "" {
		return fmt.Errorf("spec.source.registry.certConfigMap: empty; expected the name of a ConfigMap of PEM CAs")
	}
	return nil
}
