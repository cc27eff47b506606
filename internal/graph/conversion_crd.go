package graph

import (
	"sort"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/converge-dev/converge/internal/graph/crdgen"
)

// EnableConversion makes the generated CRDs serve their alsoServed versions
// (the HyperConverged's v1beta1) next to the storage version, converted by
// the webhook at cc (a Service or URL, path included; the caBundle is left
// to whoever injects it, e.g. internal/webhook). It must be called before the
// first CRDs or Render call; without it a CRD serves its storage version
// only.
func (e *Engine) EnableConversion(cc apiextensionsv1.WebhookClientConfig) {
	defer e.Lock()()
	e.conversion = cc.DeepCopy()
}

// alsoServed generates the alsoServed versions of the CRD entry v (served,
// not stored; schemas from their CUE definitions), sorted by name, with
// crd's names; nil when v has none.
func alsoServed(v cue.Value, crd *apiextensionsv1.CustomResourceDefinition) ([]apiextensionsv1.CustomResourceDefinitionVersion, error) {
	also := v.LookupPath(cue.ParsePath("alsoServed"))
	if !also.Exists() {
		return nil, nil
	}
	it, err := also.Fields()
	if err != nil {
		return nil, Format(err)
	}
	var names []string
	defs := map[string]cue.Value{}
	for it.Next() {
		names = append(names, it.Selector().Unquoted())
		defs[it.Selector().Unquoted()] = it.Value()
	}
	sort.Strings(names)
	var out []apiextensionsv1.CustomResourceDefinitionVersion
	for _, version := range names {
		n := crdgen.Names{
			Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind, ListKind: crd.Spec.Names.ListKind,
			Plural: crd.Spec.Names.Plural, Singular: crd.Spec.Names.Singular, ShortNames: crd.Spec.Names.ShortNames,
			Categories: crd.Spec.Names.Categories, Scope: crd.Spec.Scope, StatusSubresource: true,
		}
		other, err := crdgen.Generate(defs[version], n)
		if err != nil {
			return nil, err
		}
		ver := other.Spec.Versions[0]
		ver.Storage = false
		out = append(out, ver)
	}
	return out, nil
}
