package cdi_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/operators/cdi/clonetoken"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
	"github.com/converge-dev/converge/operators/cdi/dvadmission"
	"github.com/converge-dev/converge/operators/cdi/uploadtoken"
)

// images is the namespace of the golden images in TestCloneAcrossNamespaces
// (SSP's kubevirt-os-images).
const images = "images"

// TestCloneAcrossNamespaces clones a golden image of namespace images into
// namespace vms through the real API server with CDI's authorization: the
// DataVolume admission webhook (RBAC decides through
// SubjectAccessReviews) refuses bob, who may not create
// datavolumes/source in images, with CDI's message, and stamps alice's
// DataVolume with a clone token; the controller extends it, the node
// agent checks it and copies the volume. A DataVolume whose extended
// token is swapped for another DataVolume's fails CloneUnauthorized.
func TestCloneAcrossNamespaces(t *testing.T) {
	keys := uploadtoken.DefaultOptions()
	var tokens *clonetoken.Tokens
	e := newImportEnv(t, func(c client.Client, dvo *datavolume.Options, o *importcontroller.Options) {
		tokens = clonetoken.New(c, keys)
		dvo.Tokens, o.CloneKeys = tokens, keys.PublicKeys
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := e.c
	for _, n := range []string{keys.KeySecret.Namespace, images} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	// RBAC: alice and bob edit DataVolumes in vms; only alice may clone
	// from images (SSP's os-images.kubevirt.io:view grants the same to
	// every authenticated user).
	must(t, c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "dv-edit"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes"}, Verbs: []string{"create", "get"}}}}))
	must(t, c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dv-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "dv-edit"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}, {APIGroup: rbacv1.GroupName, Kind: "User", Name: "bob"}}}))
	must(t, c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: images, Name: "clone-source"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes/source"}, Verbs: []string{"create"}}}}))
	must(t, c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: images, Name: "clone-source"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "clone-source"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}}}))
	as := func(user string) client.Client {
		cfg := rest.CopyConfig(e.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		uc, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
		must(t, err)
		return uc
	}

	// The golden image and its DataSource in images.
	raw, qcow2 := storagetest.Images(t)
	url := serve(t, &slowServer{files: map[string][]byte{"/disk.qcow2": qcow2}})
	must(t, c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
		"metadata": map[string]any{"name": "golden", "namespace": images},
		"spec": map[string]any{"source": map[string]any{"http": map[string]any{"url": url + "/disk.qcow2"}},
			"storage": map[string]any{"storageClassName": scName, "resources": map[string]any{"requests": map[string]any{"storage": "16Mi"}}}},
	}}))
	dataSource := func(name, pvc string) {
		must(t, c.Create(ctx, &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: images, Name: name},
			Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: images, Name: pvc}}}}))
	}
	dataSource("fedora", "golden")
	dataSource("pending", "not-yet")

	w := dvadmission.Webhook(dvadmission.Mutator{Client: c, Reader: c, Tokens: tokens}, nil)
	certs := webhooktest.Start(t, c, webhook.Options{
		Secret:  types.NamespacedName{Namespace: keys.KeySecret.Namespace, Name: "converge-webhook-cert"},
		Hosts:   []string{"127.0.0.1"},
		Targets: w.Targets(),
		Resync:  time.Second,
	})
	ep := webhooktest.Serve(t, ctx, certs, w)
	must(t, w.Apply(ctx, c, ep, nil, "converge-test"))

	clone := func(name, dataSource string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"sourceRef": map[string]any{"kind": "DataSource", "namespace": images, "name": dataSource},
				"storage": map[string]any{"storageClassName": scName}},
		}}
	}
	wantDenied := `admission webhook "datavolume-mutate.cdi.kubevirt.io" denied the request:  User bob has insufficient permissions in clone source namespace images`
	var err error
	controlplane.Eventually(t, 30*time.Second, func() bool { // caBundle injected, configuration picked up
		err = as("bob").Create(ctx, clone("bobs", "fedora"))
		return err != nil && strings.Contains(err.Error(), "denied the request")
	})
	if !strings.Contains(err.Error(), wantDenied) {
		t.Errorf("bob's clone: %v, want %q", err, wantDenied)
	}

	must(t, as("alice").Create(ctx, clone("alices", "fedora")))
	dv := e.waitPhase(t, "alices", cdiv1.Succeeded, cdiv1.Failed)
	if dv.Status.Phase != cdiv1.Succeeded {
		t.Fatalf("alice's clone: %s, conditions %+v", dv.Status.Phase, dv.Status.Conditions)
	}
	if dv.Annotations[tokenapi.AnnCloneToken] == "" || dv.Annotations[tokenapi.AnnExtendedCloneToken] == "" {
		t.Errorf("alice's DataVolume annotations %v: want the webhook's and the extended clone token", dv.Annotations)
	}
	got, err := os.ReadFile(e.diskPath(t, "alices"))
	must(t, err)
	want := append(append([]byte{}, raw...), make([]byte, 16<<20-len(raw))...)
	if !bytes.Equal(got, want) {
		t.Errorf("alice's disk.img (%d bytes) differs from the golden image", len(got))
	}
	pvc := &corev1.PersistentVolumeClaim{}
	must(t, c.Get(ctx, keyOf("alices"), pvc))
	if pvc.Annotations[dvapi.AnnCloneRequest] != images+"/golden" {
		t.Errorf("PVC %s = %q, want %s/golden", dvapi.AnnCloneRequest, pvc.Annotations[dvapi.AnnCloneRequest], images)
	}

	t.Run("a swapped extended token fails", func(t *testing.T) {
		must(t, as("alice").Create(ctx, clone("waiting", "pending")))
		var w *cdiv1.DataVolume
		controlplane.Eventually(t, 30*time.Second, func() bool {
			w = e.dv(t, "waiting")
			return w.Annotations[tokenapi.AnnExtendedCloneToken] != ""
		})
		patch := client.MergeFrom(w.DeepCopy())
		w.Annotations[tokenapi.AnnExtendedCloneToken] = dv.Annotations[tokenapi.AnnExtendedCloneToken]
		must(t, c.Patch(ctx, w, patch))
		w = e.waitPhase(t, "waiting", cdiv1.Failed)
		cond := wantCond(t, w, cdiv1.DataVolumeRunning, corev1.ConditionFalse, dvapi.ReasonCloneUnauthorized)
		if cond != nil && !strings.Contains(cond.Message, "invalid token") {
			t.Errorf("message %q: want CDI's invalid token", cond.Message)
		}
	})
}
