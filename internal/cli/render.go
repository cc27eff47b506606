package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/internal/graph"
)

func newRender(g *globals) *cobra.Command {
	var output string
	var crds, controller bool
	ctrl := graph.DefaultControllerOptions()
	cmd := &cobra.Command{
		Use:   "render PATH | render --controller",
		Short: "Print every object the component graph derives from a config",
		Long: `render validates the config at PATH and prints the objects converge
would apply, in apply order: the HyperConverged's namespace and the HC
itself, then each component's objects (KubeVirt, CDI, NetworkAddonsConfig,
SSP, PriorityClass, HostPathProvisioner). --crds prints the generated
CustomResourceDefinitions instead. Cluster facts come from --facts FILE,
else the schema defaults (kubernetes, 3 control-plane and 3 worker nodes, amd64).

render --controller takes no PATH: it prints converge's own bundle, what
"converge install" applies — the Sync CRD, the Namespace (--namespace),
the controller's ServiceAccount, RBAC, Service and Deployment (--image,
and --node-image for the roles its native operators run) — in apply
order.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if controller {
				if len(args) > 0 {
					return fmt.Errorf("render --controller takes no PATH, got %q", args[0])
				}
				return nil
			}
			for _, f := range []string{"namespace", "image", "node-image"} {
				if cmd.Flags().Changed(f) {
					return fmt.Errorf("--%s is an option of render --controller", f)
				}
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if controller {
				objs, err := g.renderController(ctrl)
				if err != nil {
					return err
				}
				return printObjects(g, objs, output)
			}
			r, err := g.load(cmd.Context(), args[0], true)
			if err != nil {
				return err
			}
			objs := r.Objects()[len(r.CRDs):]
			if crds {
				objs = r.CRDs
			}
			return printObjects(g, objs, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml (documents separated by ---) or json (a kubectl-style List)")
	cmd.Flags().BoolVar(&crds, "crds", false, "print the generated CustomResourceDefinitions")
	cmd.Flags().StringVar(&g.facts, "facts", "", "cluster facts file (YAML, #ClusterFacts field names)")
	cmd.Flags().BoolVar(&controller, "controller", false, "print converge's own bundle (what converge install applies) instead of a config's objects")
	controllerFlags(cmd, &ctrl)
	return cmd
}

// controllerFlags adds the bundle's options to cmd (render --controller,
// install).
func controllerFlags(cmd *cobra.Command, o *graph.ControllerOptions) {
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "namespace of converge-controller")
	cmd.Flags().StringVar(&o.Image, "image", "", "image of converge-controller (default ghcr.io/converge-dev/converge-controller:<converge version>)")
	cmd.Flags().StringVar(&o.NodeImage, "node-image", "", "converge-node image the native operators' roles run (default ghcr.io/converge-dev/converge-node:<converge version>)")
}

// renderController renders converge's own bundle for o at this CLI's
// version.
func (g *globals) renderController(o graph.ControllerOptions) ([]*unstructured.Unstructured, error) {
	e, err := g.engineFor()
	if err != nil {
		return nil, err
	}
	o.Version = Version
	return e.RenderController(o)
}

func printObjects(g *globals, objs []*unstructured.Unstructured, output string) error {
	switch output {
	case "yaml":
		for i, o := range objs {
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(g.stdout, "---")
			}
			fmt.Fprint(g.stdout, string(b))
		}
	case "json":
		items := make([]any, len(objs))
		for i, o := range objs {
			items[i] = o.Object
		}
		b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(g.stdout, string(b))
	default:
		return fmt.Errorf("--output %q: want yaml or json", output)
	}
	return nil
}
