package nodehealth

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// ControllerName is the node controller's name in the manager, its logs
// and metrics.
const ControllerName = "vmi-node-health"

// EventSource is the component the controller's events name, as
// KubeVirt's node controller's.
const EventSource = "virt-controller"

// Options are the node controller's settings.
type Options struct {
	// HeartbeatTimeout is how old a node agent's kubevirt.io/heartbeat may
	// get before its VMIs are failed with reason NodeUnresponsive.
	HeartbeatTimeout time.Duration
	// SkipNameValidation lets several managers in one process register
	// the controller (controller-runtime requires unique controller names
	// per process); for tests.
	SkipNameValidation bool
}

// DefaultOptions gives HeartbeatTimeout 5 min (KubeVirt's).
func DefaultOptions() Options {
	return Options{HeartbeatTimeout: 5 * time.Minute}
}

// SetupWithManager takes a manager whose scheme knows kubevirt.io/v1 and
// the client-go types and registers the ControllerName controller with it
// (also after the manager started: it starts at once): a Reconciler on the
// manager's client, recording core/v1 Events as EventSource, for each Node
// labelled v1alpha1.AgentLabel=true and for the Node a VMI's
// kubevirt.io/nodeName label names (also a Node that is gone), one Node at
// a time. The error names the controller that could not be built.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{Client: mgr.GetClient(), HeartbeatTimeout: opts.HeartbeatTimeout,
		Events: mgr.GetEventRecorderFor(EventSource)} //nolint:staticcheck // core/v1 Events, as KubeVirt's
	if err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[v1alpha1.AgentLabel] == "true"
		}))).
		// VMIs name their node: a VMI placed on a node that is gone.
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if n := o.GetLabels()[kubevirtv1.NodeNameLabel]; n != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
			}
			return nil
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &opts.SkipNameValidation}).
		Complete(r); err != nil {
		return fmt.Errorf("building the %s controller: %w", ControllerName, err)
	}
	return nil
}
