package crdgen

import (
	"fmt"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Generate builds the CRD for the object definition def (a CUE value such
// as #HyperConverged with apiVersion, kind, metadata, spec, status), named
// and served as names says, with a single served and stored version whose
// openAPIV3Schema is Schema(def). If def fixes apiVersion or kind to a
// concrete string, it must agree with names. Errors name the CUE path that
// could not be converted.
func Generate(def cue.Value, names Names) (*apiextensionsv1.CustomResourceDefinition, error) {
	n, err := names.complete()
	if err != nil {
		return nil, err
	}
	if err := checkTypeMeta(def, n); err != nil {
		return nil, err
	}
	schema, err := Schema(def)
	if err != nil {
		return nil, err
	}
	version := apiextensionsv1.CustomResourceDefinitionVersion{
		Name:                     n.Version,
		Served:                   true,
		Storage:                  true,
		Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema},
		AdditionalPrinterColumns: n.PrinterColumns,
	}
	if n.StatusSubresource {
		version.Subresources = &apiextensionsv1.CustomResourceSubresources{
			Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{
			APIVersion: apiextensionsv1.SchemeGroupVersion.String(),
			Kind:       "CustomResourceDefinition",
		},
		ObjectMeta: metav1.ObjectMeta{Name: n.Plural + "." + n.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: n.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural:     n.Plural,
				Singular:   n.Singular,
				ShortNames: n.ShortNames,
				Kind:       n.Kind,
				ListKind:   n.ListKind,
				Categories: n.Categories,
			},
			Scope:    n.Scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version},
		},
	}, nil
}

// checkTypeMeta reports an error if def fixes apiVersion or kind to a
// concrete string that differs from what n serves.
func checkTypeMeta(def cue.Value, n Names) error {
	for _, f := range [][2]string{{"apiVersion", n.APIVersion()}, {"kind", n.Kind}} {
		field, want := f[0], f[1]
		v := def.LookupPath(cue.MakePath(cue.Str(field)))
		if !v.Exists() {
			continue
		}
		if d, ok := v.Default(); ok {
			v = d
		}
		if got, err := v.String(); err == nil && got != want {
			return fmt.Errorf("crdgen: %s: is %q but the CRD serves %q", v.Path(), got, want)
		}
	}
	return nil
}
