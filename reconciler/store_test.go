package reconciler_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/reconciler"
)

// TestConfigMapStoreFormat pins the inventory.json of `converge apply`:
// documents written by the inventory type converge had before the
// inventory became the Sync API's (taken literally from its json.Marshal)
// load with every field, and re-save byte-identically; saving what was
// loaded writes nothing, and a new revision alone is a write.
func TestConfigMapStoreFormat(t *testing.T) {
	c, err := client.New(startEnv(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name, ns, json string
		revision       string
		entries        int
	}{
		{"with revision", "with-revision",
			`{"revision":"main@sha1:3f1c0d9a8b7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a","entries":[` +
				`{"id":"_kubevirt-hyperconverged__Namespace","v":"v1","d":"7c4a8d09ca3762af61e59520943dc26494f8941b4a3c2d1e0f9a8b7c6d5e4f3a","rv":"12","c":"hco"},` +
				`{"id":"_kubevirts.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition","v":"apiextensions.k8s.io/v1","d":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","rv":"301","c":"crds"},` +
				`{"id":"kubevirt-hyperconverged_kubevirt-kubevirt-hyperconverged_kubevirt.io_KubeVirt","v":"kubevirt.io/v1","d":"5d41402abc4b2a76b9719d911017c592ae3f1c0d9a8b7e6f5a4b3c2d1e0f9a8b","rv":"4711","c":"virt"},` +
				`{"id":"kubevirt-hyperconverged_old-settings__ConfigMap","v":"v1"}]}`,
			"main@sha1:3f1c0d9a8b7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a", 4},
		{"without revision", "without-revision", // converge apply without --revision
			`{"entries":[{"id":"without-revision_without-revision_hco.kubevirt.io_HyperConverged","v":"hco.kubevirt.io/v1beta1","d":"ab","rv":"7","c":"hco"}]}`,
			"", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.ns}}); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKey{Namespace: tc.ns, Name: reconciler.InventoryName(tc.ns)}
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Data: map[string]string{"inventory.json": tc.json}}); err != nil {
				t.Fatal(err)
			}
			store := reconciler.ConfigMapStore{Client: c, Reader: c, Namespace: tc.ns, Name: tc.ns}
			stored := func() string {
				t.Helper()
				cm := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, cm); err != nil {
					t.Fatal(err)
				}
				return cm.Data["inventory.json"]
			}

			got, err := store.Load(ctx)
			if err != nil || got.Inventory == nil {
				t.Fatalf("Load = %+v, %v", got, err)
			}
			if got.Revision != tc.revision || len(got.Inventory.Entries) != tc.entries || got.Inventory.Entries[0].Component == "" {
				t.Fatalf("Load = revision %q, entries %+v; want revision %q, %d entries with components", got.Revision, got.Inventory.Entries, tc.revision, tc.entries)
			}
			if wrote, err := store.Save(ctx, got, got); err != nil || wrote {
				t.Errorf("Save of the loaded inventory: wrote %v, %v; want no write", wrote, err)
			}
			if wrote, err := store.Save(ctx, reconciler.StoredInventory{}, got); err != nil || !wrote {
				t.Fatalf("Save without a previous inventory: wrote %v, %v; want a write", wrote, err)
			}
			if s := stored(); s != tc.json {
				t.Errorf("re-saved inventory.json\n%s\nwant byte-identical\n%s", s, tc.json)
			}
			next := got
			next.Revision = "main@sha1:0000000000000000000000000000000000000001"
			if wrote, err := store.Save(ctx, got, next); err != nil || !wrote {
				t.Errorf("Save of a new revision with the same entries: wrote %v, %v; want a write", wrote, err)
			}
			if again, err := store.Load(ctx); err != nil || again.Revision != next.Revision {
				t.Errorf("Load after a new revision = %q, %v; want %q", again.Revision, err, next.Revision)
			}
		})
	}
}
