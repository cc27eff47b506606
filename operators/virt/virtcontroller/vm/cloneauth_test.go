package vm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// TestDataVolumeCloneUnauthorized: the DataVolume of a template cloning a
// PVC of another namespace is created only once the VM's ServiceAccount
// (default) may create datavolumes/source there, as KubeVirt's
// authorizeDataVolume; before, the VM reads Failure with CDI's reason and
// no DataVolume exists (RBAC of the real API server decides).
func TestDataVolumeCloneUnauthorized(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.C.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "images"}}); err != nil {
		t.Fatal(err)
	}
	tmpl := kubevirtv1.DataVolumeTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: "root"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "images", Name: "golden"}},
			Storage: &cdiv1.StorageSpec{}}}
	if err := e.C.Create(ctx, dvVM("cloner", tmpl)); err != nil {
		t.Fatal(err)
	}
	want := "not authorized to create DataVolume: User system:serviceaccount:" + e.NS + ":default has insufficient permissions in clone source namespace images"
	var last string
	controlplane.Eventually(t, 30*time.Second, func() bool {
		last = vmCondition(e.VM(t, "cloner"), kubevirtv1.VirtualMachineFailure)
		return strings.Contains(last, want)
	})
	if e.dv(t, "root") != nil {
		t.Fatal("DataVolume created though the VM's ServiceAccount may not clone from images")
	}
	// SSP's grant in the golden images namespace: every ServiceAccount.
	if err := e.C.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "view"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes/source"}, Verbs: []string{"create"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := e.C.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "view"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "system:serviceaccounts"}}}); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 60*time.Second, func() bool { return e.dv(t, "root") != nil })
}
