package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

func newTree(g *globals) *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "tree SYNC",
		Short: "Show a Sync's components and the live status of every object it applied",
		Long: `tree prints the Sync SYNC (in -n, default converge-system) as a tree, as
"flux tree kustomization" does: first the generated CRDs ("crds"), then
each graph component of status.components, in graph order, with its
health, and under each the objects of the Sync's inventory
(status.inventory) that component derives (the entry's component), each
with its kstatus status (Current, InProgress, Failed, Terminating,
NotFound) computed from the object read live. The workloads are judged
by their own rules, as the Sync judges them: a VirtualMachine is Current
when Ready or stopped as its runStrategy says, a DataVolume InProgress
with its phase and progress ("ImportInProgress 45.50%") until it
Succeeded, Failed on phase Failed. Objects of a component the
status does not list get a group of their own after the components;
entries recorded without a component (by an older controller) come last.

The objects are read from the Sync's target: the cluster of the kubeconfig
for a Sync without spec.target, else the cluster of the kubeconfig in the
Secret spec.target.kubeConfig.secretRef (key spec.target.kubeConfig.key,
default "value") in the Sync's namespace, read with the credentials in
that kubeconfig (spec.serviceAccountName is not impersonated: tree only
reads).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, s, err := g.clientAndSync(ctx, ns, args[0])
			if err != nil {
				return err
			}
			target, err := targetClient(ctx, c, s)
			if err != nil {
				return err
			}
			printTree(g.stdout, syncTree(ctx, target, s))
			return nil
		},
	}
	namespaceFlags(cmd, &ns, nil)
	return cmd
}

// targetClient gives a client of the Sync's target cluster: c itself, or
// one from the kubeconfig in the Secret spec.target names.
func targetClient(ctx context.Context, c client.Client, s *v1alpha1.Sync) (client.Client, error) {
	if s.Spec.Target == nil {
		return c, nil
	}
	ref := s.Spec.Target.KubeConfig
	key := ref.Key
	if key == "" {
		key = "value"
	}
	what := fmt.Sprintf("Sync %s/%s: target kubeconfig Secret %s/%s", s.Namespace, s.Name, s.Namespace, ref.SecretRef.Name)
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: ref.SecretRef.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s not found", what)
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	data, ok := sec.Data[key]
	if !ok {
		return nil, fmt.Errorf("%s: no key %q", what, key)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s key %q: %w", what, key, err)
	}
	tc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("%s key %q: %w", what, key, err)
	}
	return tc, nil
}

// treeNode is one line of the tree and the lines under it.
type treeNode struct {
	text     string
	children []*treeNode
}

// syncTree builds the tree of s: the CRDs, its components (each with
// the inventory objects recorded under its name), the groups of other
// recorded components, then the entries recorded without one. Each object
// is read from target and its kstatus computed.
func syncTree(ctx context.Context, target client.Client, s *v1alpha1.Sync) *treeNode {
	ready := readyCondition(s)
	root := &treeNode{text: fmt.Sprintf("Sync/%s/%s [Ready=%s] %s", s.Namespace, s.Name, ready.Status, orDash(s.Status.LastAppliedRevision))}
	crds := &treeNode{text: reconciler.CRDsComponent}
	byName := map[string]*treeNode{reconciler.CRDsComponent: crds}
	var groups []*treeNode
	for _, cs := range s.Status.Components {
		n := &treeNode{text: fmt.Sprintf("%s [%s]", cs.Name, cs.Health)}
		if cs.Message != "" {
			n.text += " " + oneLine(cs.Message)
		}
		byName[cs.Name] = n
		groups = append(groups, n)
	}
	var loose []*treeNode
	if s.Status.Inventory != nil {
		for _, e := range s.Status.Inventory.Entries {
			leaf := &treeNode{text: objectStatus(ctx, target, e)}
			if e.Component == "" {
				loose = append(loose, leaf)
				continue
			}
			parent := byName[e.Component]
			if parent == nil {
				parent = &treeNode{text: e.Component}
				byName[e.Component] = parent
				groups = append(groups, parent)
			}
			parent.children = append(parent.children, leaf)
		}
	}
	if len(crds.children) > 0 {
		root.children = append(root.children, crds)
	}
	root.children = append(root.children, groups...)
	root.children = append(root.children, loose...)
	return root
}

// objectStatus reads the inventory entry's object from c and gives its
// line: "Kind/namespace/name [Status] message".
func objectStatus(ctx context.Context, c client.Client, e v1alpha1.InventoryEntry) string {
	u, err := inventory.Object(e)
	if err != nil {
		return fmt.Sprintf("%s [Unknown] %v", e.ID, err)
	}
	ns, name := u.GetNamespace(), u.GetName()
	subject := u.GetKind() + "/" + name
	if ns != "" {
		subject = u.GetKind() + "/" + ns + "/" + name
	}
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return subject + " [" + status.NotFoundStatus.String() + "]"
	case err != nil:
		return fmt.Sprintf("%s [%s] %s", subject, status.UnknownStatus, oneLine(err.Error()))
	}
	if rule, ok := graph.WorkloadHealth[u.GetKind()]; ok && reconciler.WorkloadRule(rule) {
		st, msg := workloadStatus(rule, u)
		text := fmt.Sprintf("%s [%s]", subject, st)
		if msg != "" && st != status.CurrentStatus {
			text += " " + oneLine(msg)
		}
		return text
	}
	res, err := status.Compute(u)
	if err != nil {
		return fmt.Sprintf("%s [%s] %s", subject, status.UnknownStatus, oneLine(err.Error()))
	}
	text := fmt.Sprintf("%s [%s]", subject, res.Status)
	if res.Message != "" && res.Status != status.CurrentStatus {
		text += " " + oneLine(res.Message)
	}
	return text
}

// workloadStatus judges a workload read live with its health rule
// (reconciler.WorkloadHealth) and gives it in kstatus' words, as the rest
// of the tree: Current (Healthy), InProgress (Progressing), Failed, and
// Terminating for an object being deleted.
func workloadStatus(rule string, u *unstructured.Unstructured) (status.Status, string) {
	if u.GetDeletionTimestamp() != nil {
		return status.TerminatingStatus, ""
	}
	h, msg := reconciler.WorkloadHealth(rule, u)
	switch h {
	case reconciler.Healthy:
		return status.CurrentStatus, msg
	case reconciler.Failed:
		return status.FailedStatus, msg
	}
	return status.InProgressStatus, msg
}

// printTree draws n with box-drawing branches, as flux tree does.
func printTree(w io.Writer, n *treeNode) {
	fmt.Fprintln(w, n.text)
	printChildren(w, n.children, "")
}

func printChildren(w io.Writer, children []*treeNode, prefix string) {
	for i, c := range children {
		branch, indent := "├── ", "│   "
		if i == len(children)-1 {
			branch, indent = "└── ", "    "
		}
		fmt.Fprintln(w, prefix+branch+c.text)
		printChildren(w, c.children, prefix+indent)
	}
}
