package importcontroller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/nodeplane/cdi/importer"
)

// registrySource resolves dv's spec.source.registry for the importer, as
// CDI's import controller hands it to its importer pod
// (pkg/controller/import-controller.go: the secretRef's accessKeyId and
// secretKey, the certConfigMap, INSECURETLS when the CDI config lists
// the registry): the Secret's two keys become the basic auth, the
// ConfigMap's values the trusted CAs, Options.InsecureRegistries (the
// CDI CR's spec.config.insecureRegistries) the registries reached without
// TLS verification, Options.OCIArchiveDir the directory of oci-archive
// paths. pullMethod node is pulled the same way: the agent runs on the
// node and has no container runtime cache to share.
func (r *Reconciler) registrySource(ctx context.Context, dv *cdiv1.DataVolume) (importer.RegistrySource, error) {
	reg := dv.Spec.Source.Registry
	src := importer.RegistrySource{URL: *reg.URL, Insecure: r.Options.InsecureRegistries, ArchiveDir: r.Options.OCIArchiveDir}
	if reg.Platform != nil {
		src.Architecture = reg.Platform.Architecture
	}
	if reg.SecretRef != nil {
		s := &corev1.Secret{}
		if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: dv.Namespace, Name: *reg.SecretRef}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return src, fmt.Errorf("DataVolume %s/%s: spec.source.registry.secretRef: Secret %s not found; expected a Secret with %s and %s in namespace %s", dv.Namespace, dv.Name, *reg.SecretRef, datavolume.KeyAccess, datavolume.KeySecret, dv.Namespace)
			}
			return src, fmt.Errorf("DataVolume %s/%s: spec.source.registry.secretRef: Secret %s: %w", dv.Namespace, dv.Name, *reg.SecretRef, err)
		}
		src.Username, src.Password = string(s.Data[datavolume.KeyAccess]), string(s.Data[datavolume.KeySecret])
		if src.Username == "" && src.Password == "" {
			return src, &importer.Error{URL: src.URL, Reason: importer.ReasonInvalidInput,
				Err: fmt.Errorf("DataVolume %s/%s: spec.source.registry.secretRef: Secret %s has neither %s nor %s", dv.Namespace, dv.Name, *reg.SecretRef, datavolume.KeyAccess, datavolume.KeySecret)}
		}
	}
	if reg.CertConfigMap != nil {
		ca, err := r.readCA(ctx, dv, "spec.source.registry.certConfigMap", *reg.CertConfigMap)
		if err != nil {
			return src, err
		}
		src.CA = ca
	}
	return src, nil
}
