package netattach_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/nodeplane/network/netattach"
)

// nadCRD is the upstream NetworkAttachmentDefinition CRD (the schema
// components/cnao/nad_crd.cue generates: spec.config, a string).
func nadCRD() *apiextensionsv1.CustomResourceDefinition {
	str, obj := apiextensionsv1.JSONSchemaProps{Type: "string"}, "object"
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "network-attachment-definitions.k8s.cni.cncf.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "k8s.cni.cncf.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "network-attachment-definitions", Singular: "network-attachment-definition", Kind: "NetworkAttachmentDefinition", ShortNames: []string{"net-attach-def"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{
				OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: obj, Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec": {Type: obj, Properties: map[string]apiextensionsv1.JSONSchemaProps{"config": str}},
				}},
			}}},
		},
	}
}

// TestSources: the API source and the directory source give a
// NetworkAttachmentDefinition's config, and name the missing one with
// ErrNotFound; an object without spec.config is refused by name.
func TestSources(t *testing.T) {
	c := controlplane.StartForTest(t)
	ctx := t.Context()
	if err := c.Create(ctx, nadCRD()); err != nil {
		t.Fatal(err)
	}
	const conf = `{"cniVersion":"1.0.0","type":"bridge","bridge":"br1"}`
	mk := func(name string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetGroupVersionKind(netattach.NADGroupVersionKind)
		u.SetNamespace("default")
		u.SetName(name)
		return u
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { // once the CRD is served
		return c.Create(ctx, mk("br1", map[string]any{"config": conf})) == nil
	})
	if err := c.Create(ctx, mk("empty", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	dir := nadDir(t, map[string]string{"default/br1": conf})
	for _, tc := range []struct {
		name string
		src  netattach.ConfigSource
	}{{"api", netattach.APISource{Client: c}}, {"dir", netattach.DirSource{Dir: dir}}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.src.Config(ctx, "default", "br1")
			if err != nil || string(got) != conf {
				t.Fatalf("Config: %q, %v; want %q", got, err, conf)
			}
			_, err = tc.src.Config(ctx, "default", "nope")
			if !errors.Is(err, netattach.ErrNotFound) || !strings.HasPrefix(err.Error(), "NetworkAttachmentDefinition default/nope: ") {
				t.Errorf("missing: %v, want ErrNotFound named", err)
			}
		})
	}
	if _, err := (netattach.APISource{Client: c}).Config(ctx, "default", "empty"); err == nil || !strings.Contains(err.Error(), "default/empty: spec.config") {
		t.Errorf("empty config: %v", err)
	}
}

// TestParseConfig: one plugin or a list; a missing name is the
// NetworkAttachmentDefinition's, as multus does; bad JSON is named.
func TestParseConfig(t *testing.T) {
	for _, tc := range []struct{ name, raw, wantName, wantType, wantErr string }{
		{"plugin", `{"cniVersion":"1.0.0","name":"n1","type":"bridge","mtu":1400}`, "n1", "bridge", ""},
		{"no name", `{"cniVersion":"1.0.0","type":"bridge"}`, "nad", "bridge", ""},
		{"list", `{"cniVersion":"1.0.0","name":"l","plugins":[{"type":"bridge"},{"type":"tuning"}]}`, "l", "bridge", ""},
		{"bad json", `{"type":`, "", "", "CNI configuration of nad: "},
		{"empty list", `{"cniVersion":"1.0.0","name":"l","plugins":[]}`, "", "", "CNI configuration of nad: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, pc, err := netattach.ParseConfig("nad", []byte(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want prefix %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || list.Name != tc.wantName || pc.Type != tc.wantType {
				t.Fatalf("got name %q type %q err %v", list.Name, pc.Type, err)
			}
		})
	}
}
