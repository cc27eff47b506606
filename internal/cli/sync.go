package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// DefaultNamespace is the namespace the Sync verbs look in without -n, and
// the one converge install puts the controller (and its Sync) in, as the
// flux CLI defaults to flux-system.
const DefaultNamespace = "converge-system"

// CLIFieldManager is the field manager of the CLI's own writes (install,
// suspend, resume, reconcile), distinct from the controller's "converge".
const CLIFieldManager = "converge-cli"

// namespaceFlags adds -n/--namespace and, with all, -A/--all-namespaces.
func namespaceFlags(cmd *cobra.Command, ns *string, all *bool) {
	cmd.Flags().StringVarP(ns, "namespace", "n", DefaultNamespace, "namespace of the Sync")
	if all != nil {
		cmd.Flags().BoolVarP(all, "all-namespaces", "A", false, "Syncs of every namespace")
	}
}

// getSync reads the Sync ns/name, with an error that names it when it
// does not exist or when the cluster does not serve the Sync API.
// clientAndSync returns the cluster client of g and the Sync ns/name read
// through it; errors as getSync's.
func (g *globals) clientAndSync(ctx context.Context, ns, name string) (client.Client, *v1alpha1.Sync, error) {
	c, err := g.client()
	if err != nil {
		return nil, nil, err
	}
	s, err := getSync(ctx, c, ns, name)
	return c, s, err
}

func getSync(ctx context.Context, c client.Reader, ns, name string) (*v1alpha1.Sync, error) {
	s := &v1alpha1.Sync{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return nil, syncError(ns, name, err)
	}
	return s, nil
}

// syncError words an API error about the Sync ns/name.
func syncError(ns, name string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("Sync %s/%s not found", ns, name)
	case meta.IsNoMatchError(err):
		return errNoSyncAPI
	}
	return fmt.Errorf("Sync %s/%s: %w", ns, name, err)
}

// errNoSyncAPI is the error when the cluster has no syncs.converge.dev.
var errNoSyncAPI = fmt.Errorf("the cluster does not serve the Sync API (CRD syncs.converge.dev): run converge install")

// readyCondition gives the Sync's Ready condition, or an Unknown one when
// the controller has not reported yet.
func readyCondition(s *v1alpha1.Sync) metav1.Condition {
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		return *c
	}
	return metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionUnknown}
}

// kindArg checks that a verb's first argument names the Sync kind ("sync"
// or "syncs"), as flux's verbs take a kind.
func kindArg(verb, arg string) error {
	switch arg {
	case "sync", "syncs", "syncs.converge.dev":
		return nil
	}
	return fmt.Errorf("%s: unknown kind %q: converge has one kind, sync", verb, arg)
}
