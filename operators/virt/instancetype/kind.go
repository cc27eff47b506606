package instancetype

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	instancetypeapi "kubevirt.io/api/instancetype"
	"kubevirt.io/api/instancetype/v1beta1"
)

// The kinds of instancetype.kubevirt.io/v1beta1 (kubevirt.io/api
// instancetype/v1beta1).
var (
	InstancetypeGVK        = v1beta1.SchemeGroupVersion.WithKind("VirtualMachineInstancetype")
	ClusterInstancetypeGVK = v1beta1.SchemeGroupVersion.WithKind("VirtualMachineClusterInstancetype")
	PreferenceGVK          = v1beta1.SchemeGroupVersion.WithKind("VirtualMachinePreference")
	ClusterPreferenceGVK   = v1beta1.SchemeGroupVersion.WithKind("VirtualMachineClusterPreference")
)

// KubeVirt's messages for a matcher naming a kind it does not know
// (kubevirt pkg/instancetype/find/spec.go, preference/find/spec.go).
const (
	unexpectedInstancetypeKindFmt = "got unexpected kind in InstancetypeMatcher: %s"
	unexpectedPreferenceKindFmt   = "got unexpected kind in PreferenceMatcher: %s"
)

// InstancetypeKind gives the kind an InstancetypeMatcher's kind names, as
// KubeVirt reads it (any case; the singular or plural resource name; ""
// is the cluster kind) and whether it is namespaced, or KubeVirt's error
// for any other kind (kubevirt pkg/instancetype/find/spec.go Find).
func InstancetypeKind(kind string) (gvk schema.GroupVersionKind, namespaced bool, err error) {
	switch strings.ToLower(kind) {
	case instancetypeapi.SingularResourceName, instancetypeapi.PluralResourceName:
		return InstancetypeGVK, true, nil
	case instancetypeapi.ClusterSingularResourceName, instancetypeapi.ClusterPluralResourceName, "":
		return ClusterInstancetypeGVK, false, nil
	}
	return schema.GroupVersionKind{}, false, fmt.Errorf(unexpectedInstancetypeKindFmt, kind)
}

// PreferenceKind is InstancetypeKind for a PreferenceMatcher's kind
// (kubevirt pkg/instancetype/preference/find/spec.go FindPreference).
func PreferenceKind(kind string) (gvk schema.GroupVersionKind, namespaced bool, err error) {
	switch strings.ToLower(kind) {
	case instancetypeapi.SingularPreferenceResourceName, instancetypeapi.PluralPreferenceResourceName:
		return PreferenceGVK, true, nil
	case instancetypeapi.ClusterSingularPreferenceResourceName, instancetypeapi.ClusterPluralPreferenceResourceName, "":
		return ClusterPreferenceGVK, false, nil
	}
	return schema.GroupVersionKind{}, false, fmt.Errorf(unexpectedPreferenceKindFmt, kind)
}
