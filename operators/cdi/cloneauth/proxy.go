// Package cloneauth answers CDI's clone authorization questions against
// the API server: Proxy is the cdiv1.AuthorizationHelperProxy that
// DataVolume.AuthorizeUser and AuthorizeSA (kubevirt.io/
// containerized-data-importer-api pkg/apis/core/v1beta1 authorize.go)
// send their SubjectAccessReviews and reads through. The DataVolume
// admission webhook (operators/cdi/dvadmission), the VM validation webhook
// (operators/virt/vmadmission) and virt-controller
// (operators/virt/virtcontroller) use it, as CDI's datavolume-mutate
// webhook, KubeVirt's VM admitter and KubeVirt's VM controller use theirs.
package cloneauth

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Proxy takes a context, a client that creates SubjectAccessReviews and a
// reader (uncached: namespaces and DataSources are read once per request)
// and answers cdiv1.AuthorizationHelperProxy's calls with them.
type Proxy struct {
	Ctx    context.Context
	Client client.Client
	Reader client.Reader
}

var _ cdiv1.AuthorizationHelperProxy = Proxy{}

// CreateSar creates sar and gives it with the API server's status.
func (p Proxy) CreateSar(sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	sar = sar.DeepCopy()
	if err := p.Client.Create(p.Ctx, sar); err != nil {
		return nil, err
	}
	return sar, nil
}

// GetNamespace reads Namespace name.
func (p Proxy) GetNamespace(name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := p.Reader.Get(p.Ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return nil, err
	}
	return ns, nil
}

// GetDataSource reads DataSource namespace/name.
func (p Proxy) GetDataSource(namespace, name string) (*cdiv1.DataSource, error) {
	ds := &cdiv1.DataSource{}
	if err := p.Reader.Get(p.Ctx, types.NamespacedName{Namespace: namespace, Name: name}, ds); err != nil {
		return nil, err
	}
	return ds, nil
}
