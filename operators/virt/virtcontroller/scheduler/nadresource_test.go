package scheduler_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

func nadObject(annotation, config string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"namespace": "vms", "name": "net"}}}
	if annotation != "" {
		u.SetAnnotations(map[string]string{scheduler.NADResourceAnnotation: annotation})
	}
	if config != "" {
		u.Object["spec"] = map[string]any{"config": config}
	}
	return u
}

// TestNADResource: the resource a NetworkAttachmentDefinition requires,
// from its annotation or inferred from a bridge plugin, in a single plugin
// configuration or a list; and the configurations refused as libcni
// refuses them on the node, with errors naming the definition.
func TestNADResource(t *testing.T) {
	const bad = "NetworkAttachmentDefinition vms/net: spec.config: CNI configuration of net: "
	for _, c := range []struct {
		name, annotation, config string
		want                     corev1.ResourceName
		wantErr                  string
	}{
		{"annotation wins", "bridge.network.kubevirt.io/br0", `{"cniVersion":"0.3.1","type":"bridge","bridge":"other"}`, "bridge.network.kubevirt.io/br0", ""},
		{"annotation wins over a bad config", "bridge.network.kubevirt.io/br0", `{"type":`, "bridge.network.kubevirt.io/br0", ""},
		{"bridge plugin inferred", "", `{"cniVersion":"0.3.1","type":"bridge","bridge":"br1"}`, "bridge.network.kubevirt.io/br1", ""},
		{"bridge plugin default cni0", "", `{"cniVersion":"0.3.1","type":"bridge"}`, "bridge.network.kubevirt.io/cni0", ""},
		{"single conf with any name", "", `{"name":5,"type":"bridge","bridge":"br3"}`, "bridge.network.kubevirt.io/br3", ""},
		{"conflist first plugin", "", `{"cniVersion":"0.4.0","name":"n","plugins":[{"type":"bridge","bridge":"br2"},{"type":"tuning"}]}`, "bridge.network.kubevirt.io/br2", ""},
		{"conflist default cni0", "", `{"cniVersion":"0.4.0","plugins":[{"type":"bridge"}]}`, "bridge.network.kubevirt.io/cni0", ""},
		{"conflist first plugin not a bridge", "", `{"plugins":[{"type":"macvlan"},{"type":"bridge","bridge":"br2"}]}`, "", ""},
		{"other plugin needs nothing", "", `{"cniVersion":"0.3.1","type":"macvlan","master":"eth0"}`, "", ""},
		{"no config needs nothing", "", "", "", ""},
		{"bad config", "", `{"type":`, "", bad + "unexpected end of JSON input"},
		{"not JSON", "", `type: bridge`, "", bad + "invalid character"},
		{"not an object", "", `[{"type":"bridge"}]`, "", bad + "json: cannot unmarshal array"},
		{"single conf without type", "", `{"cniVersion":"0.3.1","bridge":"br0"}`, "", bad + "error parsing configuration: missing 'type'"},
		{"null", "", `null`, "", bad + "error parsing configuration: missing 'type'"},
		{"type not a string", "", `{"type":1}`, "", bad + "error parsing configuration: json: cannot unmarshal number"},
		{"bridge not a string", "", `{"type":"bridge","bridge":1}`, "", bad + "plugins[0]: json: cannot unmarshal number"},
		{"plugins not a list", "", `{"name":"n","plugins":{"type":"bridge"}}`, "", bad + "error parsing configuration list: invalid 'plugins' type map[string]interface {}"},
		{"plugins null", "", `{"name":"n","plugins":null}`, "", bad + "error parsing configuration list: invalid 'plugins' type <nil>"},
		{"plugins empty", "", `{"name":"n","plugins":[]}`, "", bad + "error parsing configuration list: no plugins in list"},
		{"first plugin without type", "", `{"name":"n","plugins":[{"bridge":"br0"}]}`, "", bad + "failed to parse plugin config 0: error parsing configuration: missing 'type'"},
		{"later plugin without type", "", `{"name":"n","plugins":[{"type":"bridge"},{"mtu":1400}]}`, "", bad + "failed to parse plugin config 1: error parsing configuration: missing 'type'"},
		{"plugin not an object", "", `{"name":"n","plugins":["bridge"]}`, "", bad + "failed to parse plugin config 0: error parsing configuration: json: cannot unmarshal string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := scheduler.NADResource(nadObject(c.annotation, c.config))
			if c.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one starting %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
