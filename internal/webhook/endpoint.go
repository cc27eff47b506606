package webhook

import (
	"errors"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
)

// Endpoint is where the API server reaches a webhook server whose
// certificate this package keeps: a Service in the cluster, or else a base
// URL (https://host:port, for local and test runs). Every webhook
// converge-controller serves shares it (one server, one certificate).
type Endpoint struct {
	// Service is the Service in front of the webhook server; nil means URL.
	Service *types.NamespacedName
	// ServicePort is the Service's port (default 443).
	ServicePort int32
	// URL is the server's base URL, used when Service is nil.
	URL string
}

// validate reports an Endpoint that names neither a Service nor a URL.
func (ep Endpoint) validate() error {
	if ep.Service == nil && ep.URL == "" {
		return errors.New("the webhook endpoint needs a Service or a URL")
	}
	return nil
}

func (ep Endpoint) port() int32 {
	if ep.ServicePort == 0 {
		return 443
	}
	return ep.ServicePort
}

// ClientConfig gives the WebhookClientConfig (without caBundle) through
// which the API server reaches path on the endpoint, for a CRD conversion
// webhook.
func (ep Endpoint) ClientConfig(path string) apiextensionsv1.WebhookClientConfig {
	if ep.Service != nil {
		port := ep.port()
		return apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
			Namespace: ep.Service.Namespace, Name: ep.Service.Name, Path: &path, Port: &port}}
	}
	url := strings.TrimSuffix(ep.URL, "/") + path
	return apiextensionsv1.WebhookClientConfig{URL: &url}
}

// AdmissionClientConfig gives the apply configuration of an admission
// webhook's clientConfig reaching path on the endpoint, with caBundle when
// it is not empty (empty leaves the bundle to the Manager's injection).
func (ep Endpoint) AdmissionClientConfig(path string, caBundle []byte) *acv1.WebhookClientConfigApplyConfiguration {
	cc := acv1.WebhookClientConfig()
	if ep.Service != nil {
		cc.WithService(acv1.ServiceReference().WithNamespace(ep.Service.Namespace).WithName(ep.Service.Name).
			WithPath(path).WithPort(ep.port()))
	} else {
		cc.WithURL(strings.TrimSuffix(ep.URL, "/") + path)
	}
	if len(caBundle) > 0 {
		cc.WithCABundle(caBundle...)
	}
	return cc
}
