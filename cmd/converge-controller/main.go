// Command converge-controller reconciles every converge.dev/v1alpha1 Sync
// of the cluster it runs in (or of --watch-namespace) with package
// gitops/synccontroller: it fetches each Sync's HyperConverged config from
// Git, renders the component graph and drives it into the Sync's target
// cluster (its own, or a remote one from a kubeconfig Secret), correcting
// drift as soon as its watches see it. It serves Prometheus metrics
// (--metrics-bind-address) and the push webhook receiver
// (--receiver-bind-address, POST a Sync's status.webhookPath). It also
// serves the hco-webhook, which refuses a HyperConverged converge could
// not render (operators/hco/hcowebhook), the VM validation webhook
// (operators/virt/vmadmission) and the MAC pool's webhook
// (operators/network/macpool) on one webhook server, registered through
// internal/webhook with a serving certificate it issues and rotates
// itself, and, with the same certificate, the aggregated API
// subresources.kubevirt.io/v1 of KubeVirt's virt-api
// (operators/virt/virtapi, --virt-api-bind-address).
//
// It is also the native operators (operators/operand): the virt operator
// (operators/virt/virtoperator, KubeVirt CRs), the network operator
// (operators/network/addonsoperator, NetworkAddonsConfigs), the CDI
// operator (operators/cdi/cdioperator), the HostPathProvisioner
// operator (operators/hostpath/hppoperator) and the SSP operator
// (operators/ssp/sspoperator) derive the
// roles of the operand CRs marked converge.dev/operator: native, running
// --node-image, and start converge-controller's own roles (virt-controller,
// the VM validation webhook, the MAC pool, the DataVolume controller,
// the upload token issuer and the template validator) only while a native CR wants
// them; when the last one goes the process ends with operand.ErrRoleGone
// so that it restarts without them.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	volumesnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	vmsnapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/metrics"
	"github.com/converge-dev/converge/gitops/receiver"
	"github.com/converge-dev/converge/gitops/source"
	"github.com/converge-dev/converge/gitops/synccontroller"
	"github.com/converge-dev/converge/internal/aggregated"
	"github.com/converge-dev/converge/internal/cli"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/graph/facts"
	"github.com/converge-dev/converge/internal/nodeclient"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/cdi/cdioperator"
	"github.com/converge-dev/converge/operators/cdi/clonetoken"
	"github.com/converge-dev/converge/operators/cdi/dataimportcron"
	"github.com/converge-dev/converge/operators/cdi/datasource"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
	"github.com/converge-dev/converge/operators/hco/clidownload"
	"github.com/converge-dev/converge/operators/hco/hcowebhook"
	"github.com/converge-dev/converge/operators/network/addonsoperator"
	"github.com/converge-dev/converge/operators/network/macpool"
	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/virt/virtapi"
	"github.com/converge-dev/converge/operators/virt/virtcontroller"
	"github.com/converge-dev/converge/operators/virt/virtoperator"
	"github.com/converge-dev/converge/reconciler"
)

// webhookFlags configure the webhook server the hco-webhook, the VM
// validation webhook and the MAC pool share.
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
func (w webhookFlags) endpoint() (*webhook.Endpoint, error) {
	switch {
	case w.serviceName != "" && w.serviceNS != "":
		return &webhook.Endpoint{Service: &types.NamespacedName{Namespace: w.serviceNS, Name: w.serviceName}, ServicePort: int32(w.servicePort)}, nil
	case w.serviceName != "" || w.serviceNS != "":
		return nil, fmt.Errorf("--webhook-service-name and --webhook-service-namespace go together")
	case w.url != "":
		return &webhook.Endpoint{URL: w.url}, nil
	}
	return nil, nil
}

// namespace gives the namespace of the webhook Secret (and the MAC pool's
// ConfigMap): --webhook-secret-namespace, else the Service's, else
// default.
func (w webhookFlags) namespace() string {
	switch {
	case w.secretNamespace != "":
		return w.secretNamespace
	case w.serviceNS != "":
		return w.serviceNS
	}
	return "default"
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
		metricsAddr       string
		probeAddr         string
		pprofAddr         string
		receiverAddr      string
		watchNS           string
		leaderElect       bool
		leaderNS          string
		cacheDir          string
		concurrent        int
		depRequeue        time.Duration
		lockdown          synccontroller.Lockdown
		wh                webhookFlags
		virt              bool
		macPool           bool
		mp                = macpool.DefaultSetupOptions()
		dataVolumes       bool
		snapshots         bool
		vmValidation      bool
		templateValidator bool
		cliDownload       clidownload.SetupOptions
		virtAPI           bool
		virtAPIAddr       string
		virtAPIPort       int
		cdiAPI            cdiAPIFlags
		nodeImage         string
		operandNS         string
	)
	flag.StringVar(&nodeImage, "node-image", "ghcr.io/converge-dev/converge-node:"+cli.Version, "converge-node image the native operators' roles run (the VM agent, bridge-marker, …), as upstream operators get their operand images from their environment")
	flag.StringVar(&operandNS, "operand-namespace", "converge-system", "namespace of the roles of cluster-scoped operand CRs (NetworkAddonsConfig) and of their inventory ConfigMaps: converge-controller's own, as upstream operators deploy into theirs")
	flag.BoolVar(&dataVolumes, "cdi-controller", true, "run the cdi-controller and cdi-apiserver roles: DataVolume → PVC, phases and the import node choice; DataImportCrons polling registries into DataVolumes and DataSources, and the DataSources' Ready condition; the aggregated API upload.cdi.kubevirt.io signing upload tokens and the upload proxy (start once the DataVolume CRD is installed and a native CDI exists; converge-node cdi-importer imports and takes uploads)")
	flag.BoolVar(&snapshots, "snapshot-controller", true, "run the snapshot controller (the HostPathProvisioner operator's role: external-snapshotter's snapshot-controller, VolumeSnapshot → VolumeSnapshotContent, distributed to each node's csi-snapshotter; starts once the snapshot.storage.k8s.io CRDs are established and a native HostPathProvisioner exists); turn it off when the cluster runs its own")
	flag.BoolVar(&macPool, "mac-pool", true, "run the MAC pool (kubemacpool role): a mutating webhook gives VirtualMachine NICs unique MACs from the NetworkAddonsConfig kubeMacPool range (needs the webhook server; starts once a native NetworkAddonsConfig with kubeMacPool exists)")
	flag.StringVar(&mp.Pool.ConfigMap.Name, "mac-pool-configmap", mp.Pool.ConfigMap.Name, "ConfigMap, in the webhook Secret's namespace, recording the MAC range and the allocations in flight")
	flag.DurationVar(&mp.RangeCheck, "mac-pool-range-check", mp.RangeCheck, "how often the NetworkAddonsConfig range is compared with the pool's; a change restarts the controller")
	flag.BoolVar(&vmValidation, "vm-validation", true, "serve the VM validation webhook (virt-api role): refuse VirtualMachines and VirtualMachineInstances using fields converge does not run, per docs/vmi-support.md, or a CPU model the KubeVirt CR marks obsolete (needs the webhook server; registered once a native KubeVirt CR exists)")
	flag.BoolVar(&templateValidator, "template-validator", true, "serve SSP's template validator (a validating webhook, the SSP operator's template-validator role): a VirtualMachine created from a template (labels vm.kubevirt.io/template, vm.kubevirt.io/template.namespace) must meet the Template's validations annotation, or its own vm.kubevirt.io/validations (registered once the VirtualMachine CRD and a native SSP exist; needs the webhook server)")
	flag.StringVar(&cliDownload.Dir, "cli-download-dir", "", "directory of converge CLI binaries (<arch>/<os>/converge[.exe], `make cli-binaries`) to serve over HTTPS with the webhook certificate, as HCO's cli-download serves virtctl; empty: not served")
	flag.StringVar(&cliDownload.BindAddress, "cli-download-bind-address", ":8446", "address of the cli-download server (--cli-download-dir)")
	flag.BoolVar(&virtAPI, "virt-api", true, "serve the aggregated API subresources.kubevirt.io/v1 (virt-api role: virtualmachines/start, stop, restart and virtualmachineinstances/console for virtctl, KubeVirt's client and converge vm), with the webhook certificate, and register its APIService once a native KubeVirt CR exists (needs the webhook Service and the issued certificate)")
	flag.StringVar(&virtAPIAddr, "virt-api-bind-address", ":8443", "address the aggregated API subresources.kubevirt.io is served on")
	flag.IntVar(&virtAPIPort, "virt-api-service-port", 8443, "port of --webhook-service-name in front of --virt-api-bind-address, which the APIService names")
	cdiAPI.register(flag.CommandLine)
	flag.BoolVar(&virt, "virt-controller", true, "run the virt-controller role: VirtualMachine → VirtualMachineInstance per runStrategy and the VMI scheduler (starts once a native KubeVirt CR exists)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "address of the Go pprof endpoints, /debug/pprof/ (0 disables)")
	flag.StringVar(&receiverAddr, "receiver-bind-address", ":9292", "address of the push webhook receiver, POST <a Sync's status.webhookPath> (0 disables)")
	flag.StringVar(&watchNS, "watch-namespace", "", "reconcile only the Syncs of this namespace (default: all namespaces)")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: in-cluster namespace)")
	flag.StringVar(&cacheDir, "cache-dir", "", "Git cache directory (default: the user cache dir)")
	flag.IntVar(&concurrent, "concurrent", synccontroller.DefaultOptions().Concurrency, "how many Syncs are reconciled in parallel")
	flag.BoolVar(&lockdown.AllowLocalSources, "allow-local-sources", false, "let a Sync's spec.source.url name a path or file:// URL on the controller's filesystem (refused by default, as Flux's GitRepository refuses file://: it would read any directory the controller can)")
	flag.BoolVar(&lockdown.NoCrossNamespaceRefs, "no-cross-namespace-refs", false, "refuse a Sync whose spec.dependsOn names a Sync in another namespace (Flux's --no-cross-namespace-refs)")
	flag.StringVar(&lockdown.DefaultServiceAccount, "default-service-account", "", "ServiceAccount, in each Sync's own namespace, impersonated by a Sync of this cluster that sets no spec.serviceAccountName (Flux's --default-service-account); empty: such Syncs write as converge-controller")
	flag.DurationVar(&depRequeue, "requeue-dependency", synccontroller.DefaultOptions().DependencyRequeue, "how often a Sync whose dependsOn are not ready checks them again")
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
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))

	ep, err := wh.endpoint()
	if err != nil {
		return err
	}
	if wh.enabled && ep == nil {
		ctrl.Log.Info("hco-webhook not served: set --webhook-service-name/--webhook-service-namespace or --webhook-url")
		wh.enabled = false
	}
	restCfg := ctrl.GetConfigOrDie()
	var certs *webhook.Manager
	var whServer ctrlwebhook.Server
	if wh.enabled {
		whOpts := ctrlwebhook.Options{Port: wh.port, CertDir: wh.certDir, TLSOpts: []func(*tls.Config){disableHTTP2}}
		if wh.certDir == "" {
			if certs, err = newCertManager(restCfg, wh); err != nil {
				return err
			}
			whOpts.TLSOpts = append(whOpts.TLSOpts, func(c *tls.Config) { c.GetCertificate = certs.GetCertificate })
		}
		whServer = ctrlwebhook.NewServer(whOpts)
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	cacheOpts := cache.Options{}
	if watchNS != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{watchNS: {}}
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		WebhookServer:           whServer,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "converge-controller.converge.dev",
		LeaderElectionNamespace: leaderNS,
		Cache:                   cacheOpts,
	})
	if err != nil {
		return err
	}
	engine, err := graph.NewEngine()
	if err != nil {
		return err
	}
	gopts := source.DefaultOptions()
	if cacheDir != "" {
		gopts.CacheDir = cacheDir
	}
	rec, err := metrics.NewRecorder(ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	opts := synccontroller.DefaultOptions()
	opts.Concurrency, opts.DependencyRequeue = concurrent, depRequeue
	opts.Lockdown = lockdown
	r := &synccontroller.Reconciler{Engine: engine, Fetcher: source.NewFetcher(gopts), Metrics: rec, Options: opts}
	localFacts := func(ctx context.Context) (map[string]any, error) {
		return facts.Discover(ctx, mgr.GetCache(), mgr.GetRESTMapper())
	}
	if wh.enabled {
		// v1beta1 is served too, converted by the /convert webhook.
		engine.EnableConversion(ep.ClientConfig(hcowebhook.ConvertPath))
	}
	if certs != nil {
		wireCertificate(r, certs)
	}
	if wh.enabled && ep != nil && ep.Service != nil {
		// The Sync's applies go through the hco-webhook this process
		// serves behind ep.Service: hold them until it has an endpoint.
		r.Gate = webhookReachable(mgr.GetAPIReader(), *ep.Service, 500*time.Millisecond)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	// The native operators share one operand.Options: the images their
	// roles run, the namespace of cluster-scoped CRs' roles, the version
	// they report. The CDI and HostPathProvisioner operators (storage.go)
	// come first: the CDI roles below wait on the CDI operator's gates.
	oo := operand.DefaultOptions()
	oo.Images, oo.Namespace, oo.Version = map[string]string{"node": nodeImage}, operandNS, cli.Version
	cdiGates, err := setupStorageOperators(mgr, engine, oo, wh.namespace(), snapshots)
	if err != nil {
		return err
	}
	var cloneTokens *clonetoken.Tokens
	if dataVolumes {
		dvo := datavolume.DefaultOptions()
		dvo.Gate = func(ctx context.Context) error { return cdiGates.Wait(ctx, cdioperator.RoleController) }
		dvo.CDI = cdioperator.Active(mgr.GetClient())
		if cloneTokens, err = newCloneTokens(mgr, wh.namespace()); err != nil {
			return err
		}
		dvo.Tokens = cloneTokens
		if err := datavolume.Setup(mgr, dvo); err != nil {
			return err
		}
		dico := dataimportcron.DefaultOptions()
		dico.Gate = dvo.Gate
		dico.CDI = cdioperator.Active(mgr.GetClient())
		if err := dataimportcron.Setup(mgr, dico); err != nil {
			return err
		}
		dso := datasource.DefaultOptions()
		dso.Gate = dvo.Gate
		if err := datasource.Setup(mgr, dso); err != nil {
			return err
		}
		var svc *types.NamespacedName
		if ep != nil {
			svc = ep.Service
		}
		if err := setupCDIAPI(mgr, cdiAPI, cdiGates, certs, svc, kubeconfigFlag(), wh.namespace()); err != nil {
			return err
		}
	}
	switch {
	case cliDownload.Dir != "" && certs != nil:
		cliDownload.Certs = certs
		if err := clidownload.Setup(mgr, cliDownload); err != nil {
			return err
		}
	case cliDownload.Dir != "":
		ctrl.Log.Info("cli-download not served: it needs the issued webhook certificate (no --webhook-cert-dir)")
	}
	if err := addReceiver(mgr, receiverAddr, r); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if whServer != nil {
		// Ready (and so an endpoint of the webhook Service) only once the
		// webhook server serves: the API server calls it on every
		// HyperConverged and VM write, the Sync's own applies included.
		if err := mgr.AddReadyzCheck("webhook", whServer.StartedChecker()); err != nil {
			return err
		}
	}
	var webhooks *webhook.Registrar
	if wh.enabled {
		ro := webhook.DefaultRegisterOptions()
		ro.FieldOwner = reconciler.FieldManager
		if webhooks, err = webhook.NewRegistrar(mgr, *ep, certs, ro); err != nil {
			return err
		}
		if err := webhooks.Register(hcowebhook.Webhook(engine, localFacts)); err != nil {
			return err
		}
		if cloneTokens != nil {
			if err := webhooks.Register(dvAdmission(mgr, cloneTokens, cdiGates)); err != nil {
				return err
			}
		}
	}
	// The native operators: each consumes the operand CRs marked native
	// and gates its converge-controller roles on them.
	vo := virtoperator.Options{Operand: oo, Webhooks: webhooks}
	if virt {
		vc := virtcontroller.DefaultOptions()
		vo.VirtController = &vc
	}
	switch {
	case vmValidation && webhooks != nil:
		vo.VMValidation = true
	case vmValidation:
		ctrl.Log.Info("VM validation webhook not served: it needs the webhook server (--webhook-service-name/--webhook-service-namespace or --webhook-url)")
	}
	switch {
	case virtAPI && certs != nil && ep.Service != nil:
		vo.VirtAPI = &virtapi.SetupOptions{
			SetupOptions: aggregated.SetupOptions{BindAddress: virtAPIAddr, Service: *ep.Service, ServicePort: int32(virtAPIPort), Certs: certs,
				Kubeconfig: kubeconfigFlag(), FieldOwner: reconciler.FieldManager},
			ConsoleToken: func(context.Context) (string, error) { return nodeclient.BearerToken(restCfg) },
		}
	case virtAPI:
		ctrl.Log.Info("virt-api not served: it needs the webhook Service (--webhook-service-name/--webhook-service-namespace) and the issued certificate (no --webhook-cert-dir)")
	}
	if err := virtoperator.Setup(mgr, engine, vo); err != nil {
		return err
	}
	no := addonsoperator.Options{Operand: oo, Webhooks: webhooks}
	switch {
	case macPool && webhooks != nil:
		mp.Pool.ConfigMap.Namespace = wh.namespace()
		no.MACPool = &mp
	case macPool:
		ctrl.Log.Info("MAC pool not served: it needs the webhook server (--webhook-service-name/--webhook-service-namespace or --webhook-url)")
	}
	if err := addonsoperator.Setup(mgr, engine, no); err != nil {
		return err
	}
	if err := setupSSPOperator(mgr, engine, oo, templateValidator, webhooks); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// newScheme knows the client-go types, converge.dev/v1alpha1,
// kubevirt.io/v1 (VirtualMachine, VirtualMachineInstance for the
// virt-controller), cdi.kubevirt.io/v1beta1 (DataVolume),
// upload.cdi.kubevirt.io/v1beta1 (UploadTokenRequest),
// snapshot.kubevirt.io/v1beta1 and snapshot.storage.k8s.io/v1 (the VM
// snapshot and restore controllers).
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := kubevirtv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := cdiv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := uploadv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := vmsnapshotv1beta1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := volumesnapshotv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// wireCertificate makes the hco-webhook's certificate follow the Syncs
// that drive the controller's own cluster (spec.target unset): its
// lifetimes follow their HC's spec.certConfig, as the operands'
// certificates do (with several such Syncs, the last rendered wins), and
// the CRD conversion webhook gets its caBundle after each of their syncs
// (the first creates the CRD; a later one may re-create it).
func wireCertificate(r *synccontroller.Reconciler, certs *webhook.Manager) {
	r.OnSynced = func(s *v1alpha1.Sync, _ *reconciler.Result, _ error) {
		if s.Spec.Target == nil {
			certs.Trigger()
		}
	}
	r.OnRender = func(s *v1alpha1.Sync, rd *graph.Rendered) {
		if s.Spec.Target != nil {
			return
		}
		l, err := hcowebhook.Lifetimes(rd.HyperConverged)
		if err == nil {
			err = certs.SetLifetimes(l)
		}
		if err != nil {
			ctrl.Log.Error(err, "hco-webhook certificate keeps its lifetimes", "sync", s.Namespace+"/"+s.Name)
		}
	}
}

// addReceiver serves the push webhook receiver on addr ("0" or "" serves
// nothing): POST <a Sync's status.webhookPath> triggers a reconcile of
// that Sync. r keeps the receiver's index of paths and tokens; the
// Handler reads nothing from the API before a request authenticates and
// reads its Sync from the manager's cache after. It runs on the leader
// only, where the reconciles happen. Call it before mgr starts.
func addReceiver(mgr manager.Manager, addr string, r *synccontroller.Reconciler) error {
	if addr == "" || addr == "0" {
		return nil
	}
	r.Receivers = &receiver.Index{}
	mux := http.NewServeMux()
	mux.Handle(receiver.PathPrefix, &receiver.Handler{Index: r.Receivers, Reader: mgr.GetClient(), Trigger: r.Trigger, Log: ctrl.Log.WithName("receiver")})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("receiver: listening on %s: %w", addr, err)
		}
		ctrl.Log.Info("receiver serving", "address", l.Addr().String(), "path", receiver.PathPrefix+"<sha256 of token, name and namespace: the Sync's status.webhookPath>")
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		if err := srv.Serve(l); err != nil && err != http.ErrServerClosed {
			return err
		}
		return nil
	}))
}

// kubeconfigFlag gives the kubeconfig file the manager's configuration
// came from (controller-runtime's --kubeconfig, else $KUBECONFIG), empty
// in a cluster: the virt-api's delegated authentication and authorization
// read the same one.
func kubeconfigFlag() string {
	if f := flag.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	return os.Getenv("KUBECONFIG")
}

// disableHTTP2 serves the webhook over HTTP/1.1 only, as kubebuilder's
// scaffold does against the HTTP/2 stream-reset attacks (CVE-2023-44487).
func disableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// newCertManager gives the certificate Manager of the webhook server,
// with HCO's certConfig default lifetimes, reading and writing straight
// through the API server (not the manager's cache). Its CA goes into the
// configurations (and the HyperConverged CRD's conversion webhook) the
// webhook Registrar registers.
func newCertManager(cfg *rest.Config, wh webhookFlags) (*webhook.Manager, error) {
	hosts, err := wh.hosts()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	return webhook.New(c, webhook.Options{
		Secret:     types.NamespacedName{Namespace: wh.namespace(), Name: wh.secretName},
		Hosts:      hosts,
		CAName:     "converge-webhook-ca",
		FieldOwner: "converge-webhookcert",
	})
}
