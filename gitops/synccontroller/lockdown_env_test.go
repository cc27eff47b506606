package synccontroller_test

import (
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/synccontroller"
)

// TestLockdown runs the controller as a multi-tenant platform would
// (--no-cross-namespace-refs, --default-service-account) and with its
// default refusal of local sources, against a real API server and Git
// server.
func TestLockdown(t *testing.T) {
	const defaultSA = "tenant-deployer"
	e := startEnvWith(t, func(o *synccontroller.Options) {
		o.Lockdown = synccontroller.Lockdown{NoCrossNamespaceRefs: true, DefaultServiceAccount: defaultSA}
	})

	denied := func(t *testing.T, name string, mutate func(*v1alpha1.Sync), want string) {
		t.Helper()
		key := e.sync(t, name, mutate)
		s, _ := e.wait(t, key, time.Minute, "AccessDenied", func(s *v1alpha1.Sync) bool {
			return condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.AccessDeniedReason
		})
		if c := condition(s, v1alpha1.ReadyCondition); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, want) {
			t.Errorf("Ready = %+v, want False with a message containing %q", c, want)
		}
		if c := condition(s, v1alpha1.StalledCondition); c.Status != metav1.ConditionTrue {
			t.Errorf("Stalled = %+v, want True (only a change to the Sync helps)", c)
		}
		if s.Status.LastAttemptedRevision != "" || s.Status.Inventory != nil {
			t.Errorf("a refused Sync fetched or applied: lastAttemptedRevision %q, inventory %v", s.Status.LastAttemptedRevision, s.Status.Inventory)
		}
		e.deleteSync(t, key, v1alpha1.DeletionPolicyDelete)
	}

	// The Git server's own directory as a file:// URL (the Sync CRD's
	// pattern already refuses a bare path): the controller would read it
	// from its disk without the repository's credentials.
	t.Run("local sources refused", func(t *testing.T) {
		denied(t, "file-url", func(s *v1alpha1.Sync) {
			s.Spec.Source.URL, s.Spec.Source.SecretRef = "file://"+e.repo.Dir, nil
		}, "local paths and file:// URLs are refused")
	})

	t.Run("cross-namespace dependsOn refused", func(t *testing.T) {
		denied(t, "cross-ns", func(s *v1alpha1.Sync) {
			s.Spec.DependsOn = []v1alpha1.SyncReference{{Namespace: "kube-system", Name: "infra"}}
		}, "spec.dependsOn[0]: Sync kube-system/infra is in another namespace")
	})

	// A Sync naming no service account writes as the default one of its
	// namespace: forbidden until RBAC grants it, then applied.
	t.Run("default service account", func(t *testing.T) {
		key := e.sync(t, "tenant", nil)
		user := "system:serviceaccount:" + e.ns + ":" + defaultSA
		s, _ := e.wait(t, key, time.Minute, "ApplyFailed", func(s *v1alpha1.Sync) bool {
			return condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.ApplyFailedReason
		})
		if c := condition(s, v1alpha1.ReadyCondition); !strings.Contains(c.Message, "forbidden") || !strings.Contains(c.Message, user) {
			t.Errorf("Ready = %+v, want forbidden for %s", c, user)
		}
		e.create(t, e.c1, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: defaultSA},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: e.ns, Name: defaultSA}},
		})
		e.request(t, key)
		e.wait(t, key, 2*time.Minute, "Ready with RBAC", readyAt(e.head(t)))
		e.deleteSync(t, key, v1alpha1.DeletionPolicyDelete)
	})
}
