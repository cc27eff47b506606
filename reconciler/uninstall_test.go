package reconciler_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/reconciler"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// TestUninstall applies the example plus a prune-disabled ConfigMap, then
// uninstalls with the owner labels only (no render). A delete refused by
// a ValidatingAdmissionPolicy (the KubeVirt CR) stops it before the HC,
// the namespace and the CRDs, all of which stay in the inventory; once
// allowed, a second Uninstall deletes every object, CRDs last, keeps the
// prune-disabled ConfigMap and deletes the inventory ConfigMap.
func TestUninstall(t *testing.T) {
	c, _, mk := newClient(t)
	p := mk(testOptions(false))
	ctx := context.Background()
	keep := configMap("kept", map[string]string{"k": "v"})
	keep.SetAnnotations(map[string]string{reconciler.PruneAnnotation: reconciler.Disabled})
	first := doSync(t, p, withObjects(renderExample(t, nil, nil), keep))
	store := reconciler.ConfigMapStore{Client: c, Reader: c, Namespace: hcNS, Name: hcNS}
	owner := p.OwnerLabels(hcNS, hcNS)

	allow := denyDelete(t, c, "kubevirt.io/kubevirts", obj(t, c, kvAPI, "KubeVirt", hcNS, kvName))
	cs, err := p.Uninstall(ctx, store, owner)
	if err == nil || !strings.HasPrefix(err.Error(), "KubeVirt/"+hcNS+"/"+kvName+" delete failed") {
		t.Fatalf("Uninstall error = %v, want one naming the KubeVirt CR first", err)
	}
	if obj(t, c, kvAPI, "KubeVirt", hcNS, kvName) == nil || obj(t, c, hcAPI, "HyperConverged", hcNS, hcNS) == nil {
		t.Error("KubeVirt or HC gone although the KubeVirt delete failed")
	}
	if obj(t, c, cdiAPI, "CDI", "", cdiName) != nil {
		t.Error("CDI not deleted in the operands phase")
	}
	inv, err := store.Load(ctx)
	if err != nil || inv.Inventory == nil {
		t.Fatalf("inventory after the failed uninstall: %v %v", inv.Inventory, err)
	}
	left := inventory.Index(inv.Inventory)
	for _, id := range []string{idOf(obj(t, c, kvAPI, "KubeVirt", hcNS, kvName)),
		hcNS + "_" + hcNS + "_hco.kubevirt.io_HyperConverged", "_" + hcNS + "__Namespace",
		"_kubevirts.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition"} {
		if _, ok := left[id]; !ok {
			t.Errorf("%s dropped from the inventory after the failed uninstall", id)
		}
	}
	if _, ok := left["_"+cdiName+"_cdi.kubevirt.io_CDI"]; ok {
		t.Error("deleted CDI still in the inventory")
	}
	if a := actions(cs)["ConfigMap/"+hcNS+"/kept"]; a != ssa.SkippedAction {
		t.Errorf("prune-disabled ConfigMap = %q, want skipped", a)
	}
	if _, ok := left[hcNS+"_kept__ConfigMap"]; ok {
		t.Error("prune-disabled ConfigMap still in the inventory")
	}

	allow()
	cs, err = p.Uninstall(ctx, store, owner)
	if err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	a := actions(cs)
	for _, e := range first.ChangeSet.Entries {
		switch e.ObjMetadata.GroupKind.Kind {
		case "KubeVirt", "HyperConverged", "Namespace", "CustomResourceDefinition":
			if a[e.Subject] != ssa.DeletedAction {
				t.Errorf("%s = %q, want deleted", e.Subject, a[e.Subject])
			}
		}
	}
	last := cs.Entries[len(cs.Entries)-1]
	if last.ObjMetadata.GroupKind.Kind != "CustomResourceDefinition" {
		t.Errorf("last deletion = %s, want a CRD (CRDs last)", last.Subject)
	}
	hc := &unstructured.Unstructured{}
	hc.SetAPIVersion(hcAPI)
	hc.SetKind("HyperConverged")
	if err := c.Get(ctx, client.ObjectKey{Namespace: hcNS, Name: hcNS}, hc); !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		t.Errorf("HC after Uninstall: %v, want not found", err)
	}
	// CRDs are not waited for: each owned CRD is gone or being deleted
	// (the API server finishes the deletion in its own time, minutes on a
	// loaded machine with the large VM schemas, as namespaces below).
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.MatchingLabels(owner)); err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds.Items {
		if crd.DeletionTimestamp == nil {
			t.Errorf("CRD %s not deleted", crd.Name)
		}
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: hcNS}, ns); err == nil && ns.DeletionTimestamp == nil {
		t.Error("namespace not deleted") // no namespace controller here: Terminating is enough
	}
	if kept := (&unstructured.Unstructured{}); true {
		kept.SetAPIVersion("v1")
		kept.SetKind("ConfigMap")
		if err := c.Get(ctx, client.ObjectKey{Namespace: hcNS, Name: "kept"}, kept); err != nil {
			t.Errorf("prune-disabled ConfigMap deleted: %v", err)
		}
	}
	if inv, err := store.Load(ctx); err != nil || inv.Inventory != nil {
		t.Errorf("inventory after Uninstall = %+v, %v; want the ConfigMap deleted", inv.Inventory, err)
	}
}
