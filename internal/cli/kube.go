package cli

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restConfig loads the kubeconfig the way kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config; --context picks the context.
func (g *globals) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: g.kubecontext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

func (g *globals) client() (client.Client, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{})
}
