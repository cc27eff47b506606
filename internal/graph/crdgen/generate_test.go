package crdgen

import (
	"strings"
	"testing"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

func TestGenerate(t *testing.T) {
	crd, err := Generate(fixture(t), fixtureNames)
	if err != nil {
		t.Fatal(err)
	}
	assertCRD(t, crd)
	if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
		t.Errorf("type meta %+v", crd.TypeMeta)
	}
	if crd.Name != "hyperconvergeds.hco.example.io" {
		t.Errorf("name %q", crd.Name)
	}
	n := crd.Spec.Names
	if n.Plural != "hyperconvergeds" || n.Singular != "hyperconverged" || n.ListKind != "HyperConvergedList" || n.Kind != "HyperConverged" {
		t.Errorf("names %+v", n)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("scope %q", crd.Spec.Scope)
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1beta1" || v.Subresources == nil || v.Subresources.Status == nil || len(v.AdditionalPrinterColumns) != 1 {
		t.Errorf("version %+v", v)
	}
	s := v.Schema.OpenAPIV3Schema
	wantDefault(t, at(t, s, "spec", "uninstallStrategy"), `"BlockUninstallIfWorkloadsExist"`)
	wantEnum(t, at(t, s, "spec", "uninstallStrategy"), `"BlockUninstallIfWorkloadsExist"`, `"RemoveWorkloads"`)
	wantDefault(t, at(t, s, "spec", "certConfig", "ca", "duration"), `"48h0m0s"`)
	wantDefault(t, at(t, s, "spec", "workloadUpdateStrategy", "workloadUpdateMethods"), `["LiveMigrate","Evict"]`)
	lm := at(t, s, "spec", "liveMigrationConfig", "parallelMigrationsPerCluster")
	wantDefault(t, lm, `5`)
	wantNum(t, "parallelMigrationsPerCluster.minimum", lm.Minimum, 1)
	wantNum(t, "parallelMigrationsPerCluster.maximum", lm.Maximum, 100)
}

func TestGenerateNames(t *testing.T) {
	def := fixture(t)
	for _, tc := range []struct {
		name  string
		names Names
		want  string
	}{
		{"no group", Names{Version: "v1beta1", Kind: "HyperConverged"}, "Group"},
		{"no version", Names{Group: "hco.example.io", Kind: "HyperConverged"}, "Version"},
		{"no kind", Names{Group: "hco.example.io", Version: "v1beta1"}, "Kind"},
		{"bad scope", Names{Group: "hco.example.io", Version: "v1beta1", Kind: "HyperConverged", Scope: "Galaxy"}, "Scope"},
		{"other kind", Names{Group: "hco.example.io", Version: "v1beta1", Kind: "Other"}, "#HyperConverged.kind"},
		{"other group", Names{Group: "other.io", Version: "v1beta1", Kind: "HyperConverged"}, "#HyperConverged.apiVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Generate(def, tc.names)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %s", err, tc.want)
			}
		})
	}
	crd, err := Generate(def, Names{Group: "hco.example.io", Version: "v1beta1", Kind: "HyperConverged", Plural: "hcs", Scope: apiextensionsv1.ClusterScoped})
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != "hcs.hco.example.io" || crd.Spec.Scope != apiextensionsv1.ClusterScoped || crd.Spec.Versions[0].Subresources != nil {
		t.Errorf("got %s %s %+v", crd.Name, crd.Spec.Scope, crd.Spec.Versions[0].Subresources)
	}
}

// TestSchemaNeverStricter validates sample objects with CUE and with the
// generated schema (through kube-openapi, as the API server does): what CUE
// accepts the schema must accept; enum, bound, pattern and list-length
// violations are rejected by both; constraints the schema cannot express
// (!="", time.Duration) are rejected by CUE only.
func TestSchemaNeverStricter(t *testing.T) {
	def := fixture(t)
	s, err := Schema(def)
	if err != nil {
		t.Fatal(err)
	}
	v := validator(toStructural(t, s))
	const head = `"apiVersion": "hco.example.io/v1beta1", "kind": "HyperConverged", "metadata": {"name": "kubevirt-hyperconverged"}`
	for _, tc := range []struct {
		name, spec    string
		cueOK, oapiOK bool
	}{
		{"empty spec", `{}`, true, true},
		{"full spec", `{
			"uninstallStrategy": "RemoveWorkloads",
			"tuningPolicy": "highBurst",
			"featureGates": {"downwardMetrics": true, "alignCPUs": false},
			"liveMigrationConfig": {"parallelMigrationsPerCluster": 100, "network": "migration", "bandwidthPerMigration": "64Mi"},
			"certConfig": {"ca": {"duration": "72h", "renewBefore": "1h"}},
			"infra": {"nodePlacement": {"nodeSelector": {"a": "b"}, "tolerations": [{"key": "k", "operator": "Exists"}], "affinity": {"any": {"thing": 1}}}},
			"workloadUpdateStrategy": {"workloadUpdateMethods": ["Evict"], "batchEvictionSize": 3},
			"dataImportCronTemplates": [{"metadata": {"name": "fedora"}, "spec": {"managedDataSource": "fedora", "garbageCollect": "Never"}}],
			"obsoleteCPUs": {"cpuModels": ["a", "b"]},
			"hypervisors": [{"name": "kvm"}],
			"resourceRequirements": {"storageWorkloads": {"limits": {"cpu": "500m", "memory": 1024}}},
			"networkBinding": {"passt": {"sidecarImage": "img", "domainAttachmentType": "managedTap"}}
		}`, true, true},
		{"null in a nullable enum", `{"evictionStrategy": null}`, true, true},
		{"enum violation", `{"uninstallStrategy": "Bogus"}`, false, false},
		{"nullable enum violation", `{"evictionStrategy": "Bogus"}`, false, false},
		{"nested enum violation", `{"networkBinding": {"x": {"domainAttachmentType": "bridge"}}}`, false, false},
		{"bound violation", `{"liveMigrationConfig": {"parallelMigrationsPerCluster": 0}}`, false, false},
		{"pattern violation", `{"dataImportCronTemplates": [{"metadata": {"name": "Bad_Name"}, "spec": {"managedDataSource": "x"}}]}`, false, false},
		{"missing required", `{"dataImportCronTemplates": [{"metadata": {}}]}`, false, false},
		{"too many items", `{"hypervisors": [{"name": "kvm"}, {"name": "mshv"}]}`, false, false},
		{"wrong type", `{"featureGates": {"downwardMetrics": "yes"}}`, false, false},
		{"empty network (not expressible)", `{"liveMigrationConfig": {"network": ""}}`, false, true},
		{"bad duration (not expressible)", `{"certConfig": {"ca": {"duration": "forever"}}}`, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := `{` + head + `, "spec": ` + tc.spec + `}`
			data := def.Context().CompileString(src)
			if err := data.Err(); err != nil {
				t.Fatal(err)
			}
			cueErr := def.Unify(data).Validate(cue.Concrete(true))
			if (cueErr == nil) != tc.cueOK {
				t.Errorf("CUE: got %v, want ok=%v", cueErr, tc.cueOK)
			}
			var obj any
			if err := utiljson.Unmarshal([]byte(src), &obj); err != nil {
				t.Fatal(err)
			}
			dropNulls(obj, s)
			res := v.Validate(obj)
			if res.IsValid() != tc.oapiOK {
				t.Errorf("schema: got valid=%v (%v), want %v", res.IsValid(), res.Errors, tc.oapiOK)
			}
			if cueErr == nil && !res.IsValid() {
				t.Errorf("schema is stricter than CUE: %v", res.Errors)
			}
		})
	}
}

// dropNulls removes from obj the null values of fields whose schema in s
// is not nullable, as the API server does before it validates.
func dropNulls(obj any, s *apiextensionsv1.JSONSchemaProps) {
	switch o := obj.(type) {
	case map[string]any:
		for k, v := range o {
			var sub *apiextensionsv1.JSONSchemaProps
			if p, ok := s.Properties[k]; ok {
				sub = &p
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				sub = s.AdditionalProperties.Schema
			}
			if sub == nil {
				continue
			}
			if v == nil && !sub.Nullable {
				delete(o, k)
				continue
			}
			dropNulls(v, sub)
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, v := range o {
				dropNulls(v, s.Items.Schema)
			}
		}
	}
}
