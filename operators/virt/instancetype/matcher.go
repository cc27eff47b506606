package instancetype

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// InferFromVolumeReason is why converge refuses inferFromVolume.
const InferFromVolumeReason = "converge does not infer instancetypes or preferences from a volume " +
	"(KubeVirt reads the volume's instancetype.kubevirt.io/default-instancetype and default-preference labels): name them"

// ValidateMatchers checks vm's spec.instancetype and spec.preference as
// KubeVirt's VM mutating webhook does before it looks them up (kubevirt
// pkg/instancetype/webhooks/vm/mutator.go validateMatchers, with its
// messages): a name or inferFromVolume is required, inferFromVolume
// excludes name and kind, inferFromVolumeFailurePolicy is Reject or
// Ignore, and on an update (old not nil) a matcher with a revisionName
// may not change its name without changing the revisionName. On top of
// KubeVirt's it refuses what converge cannot expand: a kind KubeVirt does
// not know (KubeVirt admits it and fails in its VM controller, with the
// same message) and inferFromVolume (InferFromVolumeReason). Each
// Conflict has the path from the VM's root and the message.
func ValidateMatchers(vm, old *kubevirtv1.VirtualMachine) Conflicts {
	var cs Conflicts
	if m := vm.Spec.Instancetype; m != nil {
		p := field.NewPath("spec", "instancetype")
		if old != nil && old.Spec.Instancetype != nil {
			cs = append(cs, matcherUpdate(p, m, old.Spec.Instancetype)...)
		}
		cs = append(cs, checkMatcher(p, m, "InstancetypeMatcher")...)
		if m.InferFromVolume == "" {
			if _, _, err := InstancetypeKind(m.Kind); err != nil {
				cs = append(cs, &Conflict{Path: p.Child("kind"), Message: err.Error()})
			}
		}
	}
	if m := vm.Spec.Preference; m != nil {
		p := field.NewPath("spec", "preference")
		if old != nil && old.Spec.Preference != nil {
			cs = append(cs, matcherUpdate(p, m, old.Spec.Preference)...)
		}
		cs = append(cs, checkMatcher(p, m, "PreferenceMatcher")...)
		if m.InferFromVolume == "" {
			if _, _, err := PreferenceKind(m.Kind); err != nil {
				cs = append(cs, &Conflict{Path: p.Child("kind"), Message: err.Error()})
			}
		}
	}
	return cs
}

// checkMatcher is KubeVirt's validateInstancetypeMatcher and
// validatePreferenceMatcher (mutator.go) for the matcher m at p, what
// naming its type in the messages; inferFromVolume is refused.
func checkMatcher(p *field.Path, m kubevirtv1.Matcher, what string) Conflicts {
	var cs Conflicts
	if m.GetName() == "" && m.GetInferFromVolume() == "" {
		cs = append(cs, &Conflict{Path: p, Message: "Either Name or InferFromVolume should be provided within the " + what})
	}
	if m.GetInferFromVolume() != "" {
		if m.GetName() != "" {
			cs = append(cs, &Conflict{Path: p.Child("name"), Message: "Name already set, should be cleared before setting inferFromVolume"})
		}
		if m.GetKind() != "" {
			cs = append(cs, &Conflict{Path: p.Child("kind"), Message: "Kind already set, should be cleared before setting inferFromVolume"})
		}
		cs = append(cs, &Conflict{Path: p.Child("inferFromVolume"), Message: InferFromVolumeReason})
	}
	if fp := m.GetInferFromVolumeFailurePolicy(); fp != nil &&
		*fp != kubevirtv1.IgnoreInferFromVolumeFailure && *fp != kubevirtv1.RejectInferFromVolumeFailure {
		cs = append(cs, &Conflict{Path: p.Child("inferFromVolumeFailurePolicy"),
			Message: fmt.Sprintf("Invalid value '%s' for InferFromVolumeFailurePolicy", *fp)})
	}
	return cs
}

// matcherUpdate is KubeVirt's validateMatcherUpdate (mutator.go, as it is
// called there: the revisionName read is the new matcher's): a matcher
// with a revisionName whose name changed while its revisionName did not.
func matcherUpdate(p *field.Path, m, old kubevirtv1.Matcher) Conflicts {
	if m.GetRevisionName() == "" {
		return nil
	}
	if m.GetName() != old.GetName() && m.GetRevisionName() == old.GetRevisionName() {
		return Conflicts{{Path: p.Child("revisionName"), Message: "the Matcher Name has been updated without updating the RevisionName"}}
	}
	return nil
}
