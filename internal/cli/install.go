package cli

import (
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
)

// syncFlags are install's options for the first Sync.
type syncFlags struct {
	name, url, branch, path string
}

func newInstall(g *globals) *cobra.Command {
	ctrl := graph.DefaultControllerOptions()
	var sf syncFlags
	var waitReady bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install converge-controller (and optionally a first Sync) into the cluster",
		Long: `install applies converge's own bundle — what "converge render --controller"
prints: the Sync CRD, the Namespace, the controller's ServiceAccount, RBAC,
Service and Deployment — with server-side apply (fluxcd/pkg/ssa
ApplyAllStaged, field manager converge-cli), waits for the CRD to be
established and, with --sync-url, applies a Sync in the same namespace
(--sync-name, default converge) following --sync-branch (default: the
repository's default branch) at --sync-path. It prints one line per object
and what happened to it (created, configured, unchanged), so a second run
prints "unchanged" for each. With --wait (the default) it then waits up to
--timeout for the Deployment to be ready.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var sync *unstructured.Unstructured
			if sf.url != "" {
				var err error
				if sync, err = sf.object(ctrl.Namespace); err != nil {
					return err
				}
			} else {
				for _, f := range []string{"sync-branch", "sync-path", "sync-name"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("--%s needs --sync-url", f)
					}
				}
			}
			objs, err := g.renderController(ctrl)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			m := ssa.NewResourceManager(c, polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{}),
				ssa.Owner{Field: CLIFieldManager, Group: v1alpha1.Group})
			opts := ssa.DefaultApplyOptions()
			opts.WaitTimeout = timeout
			cs, err := m.ApplyAllStaged(ctx, objs, opts)
			if cs != nil {
				printChangeLines(g, cs)
			}
			if err != nil {
				return fmt.Errorf("installing converge-controller: %w", err)
			}
			// The Sync CRD (objs[0]) must be established before a Sync.
			crd := object.UnstructuredSetToObjMetadataSet(objs[:1])
			if err := m.WaitForSet(crd, ssa.WaitOptions{Interval: time.Second, Timeout: timeout}); err != nil {
				return fmt.Errorf("waiting for CRD syncs.converge.dev: %w", err)
			}
			if sync != nil {
				entry, err := m.Apply(ctx, sync, ssa.DefaultApplyOptions())
				if err != nil {
					return fmt.Errorf("applying Sync %s/%s: %w", sync.GetNamespace(), sync.GetName(), err)
				}
				fmt.Fprintln(g.stdout, entry.String())
			}
			if !waitReady {
				return nil
			}
			var deploy []*unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == "Deployment" {
					deploy = append(deploy, o)
				}
			}
			fmt.Fprintf(g.stderr, "waiting up to %s for converge-controller to be ready\n", timeout)
			if err := m.WaitForSetWithContext(ctx, object.UnstructuredSetToObjMetadataSet(deploy),
				ssa.WaitOptions{Interval: 2 * time.Second, Timeout: timeout, FailFast: true}); err != nil {
				return fmt.Errorf("waiting for converge-controller: %w", err)
			}
			fmt.Fprintln(g.stderr, "converge-controller is ready")
			return nil
		},
	}
	controllerFlags(cmd, &ctrl)
	f := cmd.Flags()
	f.StringVar(&sf.url, "sync-url", "", "Git URL of a config repository: also create a Sync of it")
	f.StringVar(&sf.branch, "sync-branch", "", "branch the Sync follows (default: the repository's default branch)")
	f.StringVar(&sf.path, "sync-path", ".", "directory of the config in the repository")
	f.StringVar(&sf.name, "sync-name", "converge", "name of the Sync")
	f.BoolVar(&waitReady, "wait", true, "wait for converge-controller's Deployment to be ready")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the CRD and, with --wait, the Deployment")
	return cmd
}

// object gives the Sync of sf in namespace ns, for server-side apply.
func (sf syncFlags) object(ns string) (*unstructured.Unstructured, error) {
	s := &v1alpha1.Sync{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.SyncKind},
		ObjectMeta: metav1.ObjectMeta{Name: sf.name, Namespace: ns},
		Spec:       v1alpha1.SyncSpec{Source: v1alpha1.GitSource{URL: sf.url, Path: sf.path}},
	}
	if sf.branch != "" {
		s.Spec.Source.Ref = &v1alpha1.GitRef{Branch: sf.branch}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, fmt.Errorf("Sync %s/%s: %w", ns, sf.name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	// Fields the API server defaults are left to it: the zero values of
	// the Go types would pin them.
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "interval")
	return u, nil
}

// printChangeLines writes one "Kind/namespace/name action" line per entry,
// fluxcd/pkg/ssa's ChangeSetEntry format.
func printChangeLines(g *globals, cs *ssa.ChangeSet) {
	for _, e := range cs.Entries {
		fmt.Fprintln(g.stdout, e.String())
	}
}
