package crdgen

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Names says how the CRD is named and served.
//
// Group, Version and Kind are required. ListKind defaults to Kind+"List",
// Singular to the lower-cased Kind, Plural to Singular+"s" and Scope to
// Namespaced. StatusSubresource enables the /status subresource and
// PrinterColumns become the version's additionalPrinterColumns.
type Names struct {
	Group, Version, Kind, ListKind, Plural, Singular string
	ShortNames, Categories                           []string
	Scope                                            apiextensionsv1.ResourceScope // Namespaced or Cluster
	StatusSubresource                                bool
	PrinterColumns                                   []apiextensionsv1.CustomResourceColumnDefinition
}

// complete returns n with the defaults filled in, or an error if a required
// name is missing or the scope is unknown.
func (n Names) complete() (Names, error) {
	switch {
	case n.Group == "":
		return n, fmt.Errorf("crdgen: Names.Group is required")
	case n.Version == "":
		return n, fmt.Errorf("crdgen: Names.Version is required")
	case n.Kind == "":
		return n, fmt.Errorf("crdgen: Names.Kind is required")
	}
	if n.ListKind == "" {
		n.ListKind = n.Kind + "List"
	}
	if n.Singular == "" {
		n.Singular = strings.ToLower(n.Kind)
	}
	if n.Plural == "" {
		n.Plural = n.Singular + "s"
	}
	switch n.Scope {
	case "":
		n.Scope = apiextensionsv1.NamespaceScoped
	case apiextensionsv1.NamespaceScoped, apiextensionsv1.ClusterScoped:
	default:
		return n, fmt.Errorf("crdgen: Names.Scope %q is neither %s nor %s",
			n.Scope, apiextensionsv1.NamespaceScoped, apiextensionsv1.ClusterScoped)
	}
	return n, nil
}

// APIVersion returns the group/version string of the resource, for example
// "hco.kubevirt.io/v1beta1".
func (n Names) APIVersion() string { return n.Group + "/" + n.Version }
