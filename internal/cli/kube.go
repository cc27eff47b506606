package cli

import (
	"fmt"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// scheme holds the types the CLI reads and writes typed: client-go's,
// CustomResourceDefinitions and converge.dev/v1alpha1 (Sync).
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// restConfig loads the kubeconfig the way kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config; --context picks the context. Every
// request is bounded by --request-timeout (requestTimeout).
func (g *globals) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: g.kubecontext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	if g.requestTimeout > 0 {
		d := g.requestTimeout
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return requestTimeout{next: rt, d: d} })
	}
	return cfg, nil
}

// client gives a client of the kubeconfig's cluster that also knows
// converge.dev/v1alpha1; it can watch (converge events --watch).
func (g *globals) client() (client.WithWatch, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}
