package importcontroller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// Run runs the agent against the API server of cfg until ctx ends: a
// manager (no metrics or health endpoints, scheme client-go +
// cdi.kubevirt.io/v1beta1) with Setup, then each of opts.Setups. It
// returns ctx's end as nil, or the first error (options invalid, Node
// missing, a Setups error).
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := cdiv1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return fmt.Errorf("cdi-importer: %w", err)
	}
	if err := Setup(mgr, opts); err != nil {
		return err
	}
	for _, s := range opts.Setups {
		if err := s(mgr); err != nil {
			return err
		}
	}
	return mgr.Start(ctx)
}

// Setup checks opts, labels the Node opts.NodeName
// v1alpha1.ImporterNodeLabel=true when mgr starts, and registers the
// "cdi-importer" controller once the DataVolume CRD is established; it
// records core/v1 Events on DataVolumes as EventSource (the agent's RBAC
// needs create/patch on events). mgr's
// scheme must know cdi.kubevirt.io/v1beta1 and the client-go types.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.NodeName == "" {
		return fmt.Errorf("cdi-importer: node name: required")
	}
	if len(opts.Pools) == 0 {
		return fmt.Errorf("cdi-importer: at least one storage pool NAME=PATH is required")
	}
	if opts.DriverName == "" {
		return fmt.Errorf("cdi-importer: CSI driver name: required")
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if err := labelNode(ctx, mgr.GetClient(), opts.NodeName); err != nil {
			return err
		}
		if !WaitForCRD(ctx, mgr.GetAPIReader(), opts.CRDPoll) {
			return nil
		}
		r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: opts,
			Events: mgr.GetEventRecorderFor(EventSource)} //nolint:staticcheck // core/v1 Events, which kubectl describe shows, as CDI
		if err := ctrl.NewControllerManagedBy(mgr).
			Named("cdi-importer").
			For(&cdiv1.DataVolume{}).
			Watches(&corev1.PersistentVolumeClaim{}, EnqueueSameName).
			WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.Concurrency, 1), SkipNameValidation: &opts.SkipNameValidation}).
			Complete(r); err != nil {
			return fmt.Errorf("cdi-importer: building the controller: %w", err)
		}
		ctrl.Log.WithName("cdi-importer").Info("importing DataVolumes", "node", opts.NodeName)
		<-ctx.Done()
		return nil
	}))
}

// labelNode sets v1alpha1.ImporterNodeLabel=true on Node name (merge
// patch, other labels untouched).
func labelNode(ctx context.Context, c client.Client, name string) error {
	n := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
		return fmt.Errorf("cdi-importer: Node %s: %w (expected the Node this agent runs on, --node-name)", name, err)
	}
	if n.Labels[v1alpha1.ImporterNodeLabel] == "true" {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, v1alpha1.ImporterNodeLabel)
	if err := c.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("cdi-importer: labelling Node %s %s=true: %w", name, v1alpha1.ImporterNodeLabel, err)
	}
	return nil
}
