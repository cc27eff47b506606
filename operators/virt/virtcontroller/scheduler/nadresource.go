package scheduler

import (
	"encoding/json"
	"fmt"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// NADResourceAnnotation on a NetworkAttachmentDefinition names the device
// plugin resource a pod (here: a VMI) on that network needs, e.g.
// bridge.network.kubevirt.io/br0 (Multus; CNAO's bridge-marker reports it).
const NADResourceAnnotation = "k8s.v1.cni.cncf.io/resourceName"

// DefaultCNIBridge is the bridge plugin's bridge when its configuration
// names none (containernetworking/plugins bridge: defaultBrName).
const DefaultCNIBridge = "cni0"

// NADResource takes a NetworkAttachmentDefinition and gives the node
// resource a VMI on it needs: its NADResourceAnnotation; else, for a CNI
// configuration (spec.config, read by firstPlugin) whose first plugin is
// of type bridge, v1alpha1.BridgeResourcePrefix + its bridge
// (DefaultCNIBridge when unset); else "" (nothing to require, also for an
// empty spec.config, which multus takes from a file on the node). The
// error names the definition whose spec.config does not parse.
func NADResource(nad *unstructured.Unstructured) (corev1.ResourceName, error) {
	if res := nad.GetAnnotations()[NADResourceAnnotation]; res != "" {
		return corev1.ResourceName(res), nil
	}
	id := "NetworkAttachmentDefinition " + nad.GetNamespace() + "/" + nad.GetName()
	config, _, err := unstructured.NestedString(nad.Object, "spec", "config")
	if err != nil {
		return "", fmt.Errorf("%s: spec.config: %w", id, err)
	}
	if config == "" { // multus then reads a file on the node: nothing to infer
		return "", nil
	}
	pc, err := firstPlugin(nad.GetName(), []byte(config))
	if err != nil {
		return "", fmt.Errorf("%s: spec.config: %w", id, err)
	}
	if pc.Type != "bridge" {
		return "", nil
	}
	bridge := pc.Bridge
	if bridge == "" {
		bridge = DefaultCNIBridge
	}
	return corev1.ResourceName(v1alpha1.BridgeResourcePrefix + bridge), nil
}

// pluginConf is what the scheduler reads of a network's first CNI plugin.
type pluginConf struct {
	// Type is the plugin's type ("bridge", "macvlan", ...).
	Type string `json:"type"`
	// Bridge is the bridge plugin's bridge name ("" means DefaultCNIBridge).
	Bridge string `json:"bridge"`
}

// firstPlugin takes the spec.config of the NetworkAttachmentDefinition
// name, a network configuration list (a top-level "plugins" list) or a
// single plugin configuration, and gives its first plugin's type and
// bridge. It refuses what libcni (NetworkConfFromBytes, ConfFromBytes)
// refuses when multus loads the configuration on the node, with libcni's
// messages after "CNI configuration of <name>: ": a configuration that is
// not a JSON object; "plugins" that is not a list or is empty; a plugin
// that does not decode as a CNI plugin configuration (cnitypes.PluginConf)
// or has no "type". A first plugin whose "bridge" is not a string is
// refused too ("plugins[0]: ..."). As multus does, a single configuration
// without a (string) name is named name.
func firstPlugin(name string, raw []byte) (pluginConf, error) {
	fail := func(format string, args ...any) (pluginConf, error) {
		return pluginConf{}, fmt.Errorf("CNI configuration of %s: "+format, append([]any{name}, args...)...)
	}
	var top map[string]any
	if err := json.Unmarshal(raw, &top); err != nil {
		return fail("%w", err)
	}
	var first []byte
	if plugins, isList := top["plugins"]; isList {
		list, ok := plugins.([]any)
		if !ok {
			return fail("error parsing configuration list: invalid 'plugins' type %T", plugins)
		}
		if len(list) == 0 {
			return fail("error parsing configuration list: no plugins in list")
		}
		for i, p := range list {
			b, _ := json.Marshal(p) // decoded from JSON: it encodes
			if err := checkPlugin(b); err != nil {
				return fail("failed to parse plugin config %d: %w", i, err)
			}
			if i == 0 {
				first = b
			}
		}
	} else {
		if n, _ := top["name"].(string); n == "" && top != nil {
			top["name"] = name
			raw, _ = json.Marshal(top)
		}
		if err := checkPlugin(raw); err != nil {
			return fail("%w", err)
		}
		first = raw
	}
	var pc pluginConf
	if err := json.Unmarshal(first, &pc); err != nil {
		return fail("plugins[0]: %w", err)
	}
	return pc, nil
}

// checkPlugin checks one plugin configuration as libcni's
// NetworkPluginConfFromBytes does: it decodes as a cnitypes.PluginConf and
// names its "type".
func checkPlugin(raw []byte) error {
	var pc cnitypes.PluginConf
	if err := json.Unmarshal(raw, &pc); err != nil {
		return fmt.Errorf("error parsing configuration: %w", err)
	}
	if pc.Type == "" {
		return fmt.Errorf("error parsing configuration: missing 'type'")
	}
	return nil
}
