package synccontroller

import (
	"fmt"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/source"
)

// Lockdown is what a multi-tenant platform team turns on so that whoever
// may create a Sync gets no more than their namespace's RBAC allows, as
// Flux's --no-cross-namespace-refs, --default-service-account and its
// refusal of file:// sources. The zero Lockdown refuses local sources and
// allows the rest (converge-controller's defaults).
type Lockdown struct {
	// AllowLocalSources lets spec.source.url name a path or file:// URL
	// on the controller's own filesystem. Off, such a Sync is refused
	// (Ready=False AccessDenied, Stalled): a local path could read any
	// directory the controller can, other Syncs' clones included, without
	// their credentials or signature checks. Tests and single-user local
	// runs turn it on (converge-controller --allow-local-sources).
	AllowLocalSources bool
	// NoCrossNamespaceRefs refuses a Sync whose spec.dependsOn names a
	// Sync in another namespace (Flux's --no-cross-namespace-refs).
	NoCrossNamespaceRefs bool
	// DefaultServiceAccount, when set, is impersonated for a Sync of the
	// controller's own cluster (no spec.target) that names no
	// spec.serviceAccountName, so it writes with that account of its own
	// namespace, not with the controller's identity (Flux's
	// --default-service-account). Syncs of a remote target write with the
	// target's kubeconfig identity, as in Flux.
	DefaultServiceAccount string
}

// denied returns why s breaks the lockdown, nil when it does not. The
// message names the field and the flag that allows it.
func (l Lockdown) denied(s *v1alpha1.Sync) error {
	if !l.AllowLocalSources && source.IsLocal(s.Spec.Source.URL) {
		return fmt.Errorf("spec.source.url %q: local paths and file:// URLs are refused (they read the controller's own filesystem); serve the repository over https or ssh, or start converge-controller with --allow-local-sources", s.Spec.Source.URL)
	}
	if l.NoCrossNamespaceRefs {
		for i, d := range s.Spec.DependsOn {
			if d.Namespace != "" && d.Namespace != s.Namespace {
				return fmt.Errorf("spec.dependsOn[%d]: Sync %s/%s is in another namespace than %s, and converge-controller runs with --no-cross-namespace-refs", i, d.Namespace, d.Name, s.Namespace)
			}
		}
	}
	return nil
}

// serviceAccount is the account a Sync's writes impersonate:
// spec.serviceAccountName, else DefaultServiceAccount for the local
// cluster; "" writes with the target's own identity.
func (l Lockdown) serviceAccount(s *v1alpha1.Sync) string {
	if s.Spec.ServiceAccountName != "" {
		return s.Spec.ServiceAccountName
	}
	if s.Spec.Target == nil {
		return l.DefaultServiceAccount
	}
	return ""
}
