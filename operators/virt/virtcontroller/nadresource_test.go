package virtcontroller_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/operators/virt/virtcontroller"
)

func nadObject(annotation, config string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"namespace": "vms", "name": "net"}}}
	if annotation != "" {
		u.SetAnnotations(map[string]string{virtcontroller.NADResourceAnnotation: annotation})
	}
	if config != "" {
		u.Object["spec"] = map[string]any{"config": config}
	}
	return u
}

// TestNADResource: the resource a NetworkAttachmentDefinition requires,
// from its annotation or inferred from a bridge plugin.
func TestNADResource(t *testing.T) {
	for _, c := range []struct {
		name, annotation, config string
		want                     corev1.ResourceName
		wantErr                  string
	}{
		{"annotation wins", "bridge.network.kubevirt.io/br0", `{"cniVersion":"0.3.1","type":"bridge","bridge":"other"}`, "bridge.network.kubevirt.io/br0", ""},
		{"bridge plugin inferred", "", `{"cniVersion":"0.3.1","type":"bridge","bridge":"br1"}`, "bridge.network.kubevirt.io/br1", ""},
		{"bridge plugin default cni0", "", `{"cniVersion":"0.3.1","type":"bridge"}`, "bridge.network.kubevirt.io/cni0", ""},
		{"conflist first plugin", "", `{"cniVersion":"0.4.0","name":"n","plugins":[{"type":"bridge","bridge":"br2"},{"type":"tuning"}]}`, "bridge.network.kubevirt.io/br2", ""},
		{"other plugin needs nothing", "", `{"cniVersion":"0.3.1","type":"macvlan","master":"eth0"}`, "", ""},
		{"no config needs nothing", "", "", "", ""},
		{"bad config", "", `{"type":`, "", "NetworkAttachmentDefinition vms/net: spec.config: CNI configuration of net"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := virtcontroller.NADResource(nadObject(c.annotation, c.config))
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
