package graph_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"

	"github.com/converge-dev/converge"
	"github.com/converge-dev/converge/internal/graph"
)

// agentDefinitions are CUE expressions, one per component package, giving
// the objects of each node agent's definition for a sample input: the
// VM agent with a storage pool, bridge-marker with cni-install, the cdi-importer, and
// hostpath-csi with two pools, one backed by a PVC (a pool worker
// Deployment running hostpath-pool-mounter on node-1).
var agentDefinitions = map[string]string{
	"./components/virt": `(#Roles & {cr: {apiVersion: "kubevirt.io/v1", kind: "KubeVirt", metadata: {name: "kv", namespace: "kubevirt-hyperconverged"}}, namespace: "kubevirt-hyperconverged", images: node: "node:dev", inputs: pools: [{name: "local", path: "/var/hpvolumes"}]}).objects`,
	"./components/cnao": `(#Roles & {cr: {apiVersion: "networkaddonsoperator.network.kubevirt.io/v1", kind: "NetworkAddonsConfig", metadata: name: "cluster", spec: linuxBridge: {}}, namespace: "converge-system", images: node: "node:dev"}).objects`,
	"./components/cdi":  `(#Roles & {cr: {apiVersion: "cdi.kubevirt.io/v1beta1", kind: "CDI", metadata: name: "cdi"}, namespace: "kubevirt-hyperconverged", images: node: "node:dev", inputs: {pools: [{name: "local", path: "/var/hpvolumes"}, {name: "fast", path: "/mnt/nvme/hpp"}], uploadKeysNamespace: "converge-system"}}).objects`,
	"./components/hpp":  `(#Roles & {cr: {apiVersion: "hostpathprovisioner.kubevirt.io/v1beta1", kind: "HostPathProvisioner", metadata: name: "hpp", spec: storagePools: [{name: "local", path: "/var/hpvolumes"}, {name: "fast", path: "/mnt/nvme/hpp", pvcTemplate: resources: requests: storage: "10Gi"}]}, namespace: "kubevirt-hyperconverged", images: node: "node:dev", inputs: nodes: ["node-1"]}).objects`,
}

// agentContainer is one container (or initContainer) of a derived
// DaemonSet that runs a converge-node subcommand.
type agentContainer struct {
	daemonSet, name, subcommand string
	args                        []string
	env                         []string
}

// TestNodeAgentArgsAreFlags builds the real converge-node and checks that
// every DaemonSet (and Deployment) container running it names a subcommand converge-node
// has, passes only flags that subcommand defines, and refers ($(VAR)) only
// to environment variables the container sets. The DaemonSets are those
// of the node agents' CUE definitions (agentDefinitions): the VM agent,
// bridge-marker with cni-install, the cdi-importer and hostpath-csi, and
// the hostpath storage pool worker Deployment (hostpath-pool-mounter).
func TestNodeAgentArgsAreFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/converge-node")
	}
	ctx := cuecontext.New()
	var agents []agentContainer
	var daemonSets []string
	for pkg, expr := range agentDefinitions {
		insts := load.Instances([]string{pkg}, &load.Config{FS: converge.CUE, Dir: "/"})
		if err := insts[0].Err; err != nil {
			t.Fatal(err)
		}
		v := ctx.BuildInstance(insts[0])
		objs := ctx.CompileString(expr, cue.Scope(v))
		var m map[string]map[string]any
		if err := objs.Decode(&m); err != nil {
			t.Fatalf("%s: %v", pkg, graph.Format(err))
		}
		for _, o := range m {
			if o["kind"] != "DaemonSet" && o["kind"] != "Deployment" {
				continue
			}
			md, _ := o["metadata"].(map[string]any)
			ds, _ := md["name"].(string)
			daemonSets = append(daemonSets, ds)
			agents = append(agents, agentContainers(t, ds, o)...)
		}
	}
	slices.Sort(daemonSets)
	want := []string{"converge-bridge-marker", "converge-cdi-importer", "converge-vm-agent", "hostpath-provisioner-csi", "hpp-pool-fast-node-1"}
	if !slices.Equal(daemonSets, want) {
		t.Fatalf("derived DaemonSets and Deployments %v, want %v", daemonSets, want)
	}

	bin := filepath.Join(t.TempDir(), "converge-node")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/converge-node").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	flagsOf := map[string]map[string]bool{}
	for _, a := range agents {
		if flagsOf[a.subcommand] == nil {
			flagsOf[a.subcommand] = subcommandFlags(t, bin, a.subcommand)
		}
		flags := flagsOf[a.subcommand]
		for _, arg := range a.args {
			if !strings.HasPrefix(arg, "--") {
				t.Errorf("DaemonSet %s container %s: argument %q is not a --flag", a.daemonSet, a.name, arg)
				continue
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			if !flags[name] {
				t.Errorf("DaemonSet %s container %s passes %s, which converge-node %s does not define", a.daemonSet, a.name, arg, a.subcommand)
			}
			for _, m := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(arg, -1) {
				if !slices.Contains(a.env, m[1]) {
					t.Errorf("DaemonSet %s container %s passes %s, but sets no env %s", a.daemonSet, a.name, arg, m[1])
				}
			}
		}
		t.Logf("%s/%s: converge-node %s %s", a.daemonSet, a.name, a.subcommand, strings.Join(a.args, " "))
	}
}

// agentContainers gives the containers and initContainers of DaemonSet
// object ds whose command is converge-node SUBCOMMAND; any other command
// is an error.
func agentContainers(t *testing.T, ds string, obj map[string]any) []agentContainer {
	t.Helper()
	spec, _ := obj["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	var out []agentContainer
	for _, field := range []string{"initContainers", "containers"} {
		cs, _ := pod[field].([]any)
		for _, c := range cs {
			c, _ := c.(map[string]any)
			a := agentContainer{daemonSet: ds}
			a.name, _ = c["name"].(string)
			cmd := stringList(c["command"])
			if len(cmd) != 2 || cmd[0] != "converge-node" {
				t.Errorf("DaemonSet %s %s %s: command %q, want [converge-node SUBCOMMAND]", ds, field, a.name, cmd)
				continue
			}
			a.subcommand, a.args = cmd[1], stringList(c["args"])
			envs, _ := c["env"].([]any)
			for _, e := range envs {
				if m, ok := e.(map[string]any); ok {
					n, _ := m["name"].(string)
					a.env = append(a.env, n)
				}
			}
			out = append(out, a)
		}
	}
	return out
}

// subcommandFlags gives the long flags `converge-node sub --help` lists;
// it fails the test when sub is not a subcommand (cobra then prints the
// root's help, whose only flag is --help).
func subcommandFlags(t *testing.T, bin, sub string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, sub, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("converge-node %s --help: %v\n%s", sub, err, out)
	}
	if !strings.Contains(string(out), "converge-node "+sub) {
		t.Fatalf("converge-node has no subcommand %s:\n%s", sub, out)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-[a-zA-Z], )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	delete(flags, "help")
	if len(flags) == 0 {
		t.Fatalf("could not read converge-node %s's flags from --help:\n%s", sub, out)
	}
	return flags
}

// stringList converts a decoded YAML list of strings; anything else gives
// nil.
func stringList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
