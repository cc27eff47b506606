// Command converge-controller runs the converge pipeline continuously: it
// fetches a HyperConverged config from a Git URL, renders the component
// graph and drives it into the cluster it runs in (the in-cluster
// Deployment), correcting drift as soon as its watches see it. It also
// serves the hco-webhook, which refuses a HyperConverged converge could
// not render (package admission), with a serving certificate it issues
// and rotates itself (package webhookcert).
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/admission"
	"github.com/converge-dev/converge/facts"
	"github.com/converge-dev/converge/gitops"
	"github.com/converge-dev/converge/graph"
	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/webhookcert"
)

// webhookFlags configure the hco-webhook.
type webhookFlags struct {
	enabled                     bool
	port                        int
	certDir                     string
	secretName, secretNamespace string
	serviceName, serviceNS      string
	servicePort                 int
	url                         string
}

// endpoint gives where the API server reaches the webhook, or nil when
// neither a Service nor a URL is configured.
func (w webhookFlags) endpoint() (*admission.Endpoint, error) {
	switch {
	case w.serviceName != "" && w.serviceNS != "":
		return &admission.Endpoint{Service: &types.NamespacedName{Namespace: w.serviceNS, Name: w.serviceName}, ServicePort: int32(w.servicePort)}, nil
	case w.serviceName != "" || w.serviceNS != "":
		return nil, fmt.Errorf("--webhook-service-name and --webhook-service-namespace go together")
	case w.url != "":
		return &admission.Endpoint{URL: w.url}, nil
	}
	return nil, nil
}

// hosts gives the names the serving certificate covers: the Service's DNS
// names, or the URL's host.
func (w webhookFlags) hosts() ([]string, error) {
	if w.serviceName != "" {
		svc := w.serviceName + "." + w.serviceNS
		return []string{svc + ".svc", w.serviceName, svc, svc + ".svc.cluster.local"}, nil
	}
	u, err := url.Parse(w.url)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil, fmt.Errorf("--webhook-url %q: want https://HOST[:PORT]", w.url)
	}
	return []string{u.Hostname()}, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		src         gitops.Source
		path        string
		interval    time.Duration
		metricsAddr string
		probeAddr   string
		leaderElect bool
		leaderNS    string
		cacheDir    string
		noPrune     bool
		wh          webhookFlags
	)
	flag.StringVar(&src.URL, "repo-url", "", "Git URL of the config repository (local path, file://, http(s)://)")
	flag.StringVar(&src.Ref.Branch, "branch", "", "branch to follow (default: the remote's default branch)")
	flag.StringVar(&src.Ref.Tag, "tag", "", "tag to check out")
	flag.StringVar(&src.Ref.Commit, "commit", "", "commit to check out")
	flag.StringVar(&path, "path", ".", "directory of the config inside the repository")
	flag.DurationVar(&interval, "interval", time.Minute, "how often to fetch and reconcile")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: in-cluster namespace)")
	flag.StringVar(&cacheDir, "cache-dir", "", "Git cache directory (default: the user cache dir)")
	flag.BoolVar(&noPrune, "no-prune", false, "never delete objects that left the config")
	flag.BoolVar(&wh.enabled, "webhook", true, "serve the hco-webhook, the validating admission webhook of HyperConverged (needs --webhook-service-name/--webhook-service-namespace or --webhook-url)")
	flag.IntVar(&wh.port, "webhook-port", 4343, "port of the hco-webhook server")
	flag.StringVar(&wh.certDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key of an externally managed serving certificate (e.g. from cert-manager); empty: issue and rotate one in --webhook-secret-name and inject its CA into the webhook configuration")
	flag.StringVar(&wh.secretName, "webhook-secret-name", "converge-webhook-cert", "Secret holding the issued CA and serving certificate")
	flag.StringVar(&wh.secretNamespace, "webhook-secret-namespace", "", "namespace of --webhook-secret-name (default: --webhook-service-namespace, else default)")
	flag.StringVar(&wh.serviceName, "webhook-service-name", "", "Service in front of the hco-webhook server (in-cluster)")
	flag.StringVar(&wh.serviceNS, "webhook-service-namespace", "", "namespace of --webhook-service-name")
	flag.IntVar(&wh.servicePort, "webhook-service-port", 443, "port of --webhook-service-name")
	flag.StringVar(&wh.url, "webhook-url", "", "base URL the API server calls the hco-webhook at instead of a Service, e.g. https://127.0.0.1:4343 (local runs)")
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	if src.URL == "" {
		return fmt.Errorf("--repo-url is required")
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))

	req, err := labels.NewRequirement(reconciler.OwnerGroup+"/inventory", selection.Exists, nil)
	if err != nil {
		return err
	}
	inventorySel := labels.NewSelector().Add(*req)
	ep, err := wh.endpoint()
	if err != nil {
		return err
	}
	if wh.enabled && ep == nil {
		ctrl.Log.Info("hco-webhook not served: set --webhook-service-name/--webhook-service-namespace or --webhook-url")
		wh.enabled = false
	}
	restCfg := ctrl.GetConfigOrDie()
	var certs *webhookcert.Manager
	var whServer webhook.Server
	if wh.enabled {
		whOpts := webhook.Options{Port: wh.port, CertDir: wh.certDir, TLSOpts: []func(*tls.Config){disableHTTP2}}
		if wh.certDir == "" {
			if certs, err = newCertManager(restCfg, wh); err != nil {
				return err
			}
			whOpts.TLSOpts = append(whOpts.TLSOpts, func(c *tls.Config) { c.GetCertificate = certs.GetCertificate })
		}
		whServer = webhook.NewServer(whOpts)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		WebhookServer:           whServer,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "converge-controller.converge.dev",
		LeaderElectionNamespace: leaderNS,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: inventorySel},
		}},
	})
	if err != nil {
		return err
	}
	engine, err := graph.NewEngine()
	if err != nil {
		return err
	}
	gopts := gitops.DefaultOptions()
	if cacheDir != "" {
		gopts.CacheDir = cacheDir
	}
	opts := reconciler.DefaultOptions()
	opts.Prune = !noPrune
	s := &reconciler.GitSync{
		Fetcher: gitops.NewFetcher(gopts), Source: src, Path: path, Interval: interval, Engine: engine,
		Pipeline: reconciler.NewPipeline(mgr.GetClient(), mgr.GetCache(), opts),
		Facts: func(ctx context.Context) (map[string]any, error) {
			return facts.Discover(ctx, mgr.GetCache(), mgr.GetRESTMapper())
		},
	}
	if wh.enabled {
		// v1beta1 is served too, converted by the /convert webhook.
		engine.EnableConversion(ep.ClientConfig(admission.ConvertPath))
	}
	if certs != nil {
		// The CRD's conversion webhook gets its caBundle once the first
		// sync created the CRD (and after every later sync, in case the
		// CRD was re-created).
		s.OnResult = func(*reconciler.Result, error) { certs.Trigger() }
		// The webhook certificate follows the HC's certConfig, like the
		// operands' certificates do.
		s.OnRender = func(r *graph.Rendered) {
			l, err := admission.Lifetimes(r.HyperConverged)
			if err == nil {
				err = certs.SetLifetimes(l)
			}
			if err != nil {
				ctrl.Log.Error(err, "hco-webhook certificate keeps its lifetimes")
			}
		}
	}
	if err := s.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if wh.enabled {
		if err := setupWebhook(mgr, engine, *ep, certs, s.Facts); err != nil {
			return err
		}
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// disableHTTP2 serves the webhook over HTTP/1.1 only, as kubebuilder's
// scaffold does against the HTTP/2 stream-reset attacks (CVE-2023-44487).
func disableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// newCertManager gives the webhookcert.Manager of the serving certificate,
// with HCO's certConfig default lifetimes, reading and writing straight
// through the API server (not the manager's cache).
func newCertManager(cfg *rest.Config, wh webhookFlags) (*webhookcert.Manager, error) {
	hosts, err := wh.hosts()
	if err != nil {
		return nil, err
	}
	ns := wh.secretNamespace
	if ns == "" {
		ns = wh.serviceNS
	}
	if ns == "" {
		ns = "default"
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	return webhookcert.New(c, webhookcert.Options{
		Secret: types.NamespacedName{Namespace: ns, Name: wh.secretName},
		Hosts:  hosts,
		Targets: []webhookcert.Target{
			{Kind: webhookcert.ValidatingWebhook, Name: admission.ConfigurationName},
			{Kind: webhookcert.CRDConversion, Name: "hyperconvergeds.hco.kubevirt.io"},
		},
		CAName:     "converge-webhook-ca",
		FieldOwner: "converge-webhookcert",
	})
}

// setupWebhook serves the Validator on the manager's webhook server and
// adds the runnables that keep the certificate (certs; nil for an
// externally managed one) and register the ValidatingWebhookConfiguration
// once the engine's CRDs are generated (the first render would otherwise
// outlast the webhook timeout) and the certificate is served; a failed
// registration is retried every 5s.
func setupWebhook(mgr manager.Manager, engine *graph.Engine, ep admission.Endpoint, certs *webhookcert.Manager,
	facts func(context.Context) (map[string]any, error)) error {
	admission.Register(mgr.GetWebhookServer(), &admission.Validator{Engine: engine, Facts: facts})
	admission.RegisterConversion(mgr.GetWebhookServer(), &admission.Converter{Engine: engine})
	if certs != nil {
		if err := mgr.Add(certs); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("webhook-certificate", certs.ReadyCheck); err != nil {
			return err
		}
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if _, err := engine.CRDs(); err != nil {
			return err
		}
		var caBundle []byte
		if certs != nil {
			select {
			case <-certs.Ready():
			case <-ctx.Done():
				return nil
			}
			caBundle = certs.CABundle()
		}
		for {
			err := admission.Apply(ctx, c, ep, caBundle, reconciler.FieldManager)
			if err == nil {
				break
			}
			ctrl.Log.Error(err, "registering the hco-webhook; retrying in 5s")
			select {
			case <-time.After(5 * time.Second):
			case <-ctx.Done():
				return nil
			}
		}
		if certs != nil {
			certs.Trigger() // re-inject, should the CA have rotated meanwhile
		}
		ctrl.Log.Info("hco-webhook registered", "configuration", admission.ConfigurationName)
		<-ctx.Done()
		return nil
	}))
}
