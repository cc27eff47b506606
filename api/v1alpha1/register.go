package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of the API.
const (
	Group   = "converge.dev"
	Version = "v1alpha1"
	// SyncKind is the kind of Sync.
	SyncKind = "Sync"
)

// GroupVersion is converge.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// SchemeBuilder adds the API's types to a scheme; AddToScheme applies it.
var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Sync{}, &SyncList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
