package reconciler

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// StoredInventory is what an InventoryStore keeps for one sync target:
// the inventory (the Sync API's type) and, beside it, the revision its
// entries were applied from (a Sync's status.inventory and
// status.lastAppliedRevision, as Flux's Kustomization keeps
// status.inventory beside status.lastAppliedRevision). The zero value is
// "nothing saved".
type StoredInventory struct {
	// Inventory is the applied set; nil when none was saved.
	Inventory *v1alpha1.Inventory
	// Revision is the config revision the entries were applied from.
	Revision string
}

// InventoryStore keeps the inventory of one sync target between syncs.
// The Pipeline calls Load once at the start of a sync and Save once at
// its end, also after a failed apply (with the previous inventory plus
// what was applied, and the previous revision), never after a failed
// fetch or render.
type InventoryStore interface {
	// Load returns the saved inventory, or a zero StoredInventory and
	// no error when none was saved.
	Load(ctx context.Context) (StoredInventory, error)
	// Save stores next. prev is what Load returned, so an implementation
	// can skip a write that changes nothing; it reports whether it wrote.
	Save(ctx context.Context, prev, next StoredInventory) (bool, error)
}

// ConfigMapStore keeps the inventory in a ConfigMap in Namespace, under
// key inventory.json, labelled converge.dev/inventory: Name: the store of
// `converge apply`, which has no Sync object (ConfigMap
// InventoryName(Name) in the HC's namespace), and of each native
// operator's CR. Saving an empty inventory deletes the ConfigMap.
type ConfigMapStore struct {
	Client    client.Client
	Reader    client.Reader
	Namespace string
	// Name is the owner's name (the HC's for `converge apply`).
	Name string
	// ConfigMap names the ConfigMap; empty means InventoryName(Name).
	ConfigMap string
	// FieldManager writes the ConfigMap; empty means FieldManager.
	FieldManager string
}

// NamespacedStore is an InventoryStore kept in a namespace (StoreNamespace).
// A sync that creates that namespace does not try its write-ahead record
// (see ahead) before the namespace's batch is applied: the API server
// holds a create in a missing namespace about 50 ms
// (NamespaceLifecycle's missingNamespaceWait) before refusing it.
type NamespacedStore interface {
	InventoryStore
	// StoreNamespace is the namespace the store writes in.
	StoreNamespace() string
}

// StoreNamespace implements NamespacedStore: Namespace.
func (s ConfigMapStore) StoreNamespace() string { return s.Namespace }

// Load implements InventoryStore.
func (s ConfigMapStore) Load(ctx context.Context) (StoredInventory, error) {
	return loadInventory(ctx, s.Reader, s.Namespace, s.configMap())
}

// Save implements InventoryStore.
func (s ConfigMapStore) Save(ctx context.Context, prev, next StoredInventory) (bool, error) {
	manager := s.FieldManager
	if manager == "" {
		manager = FieldManager
	}
	return saveInventory(ctx, s.Client, s.Namespace, s.configMap(), s.Name, manager, prev, next)
}

func (s ConfigMapStore) configMap() string {
	if s.ConfigMap != "" {
		return s.ConfigMap
	}
	return InventoryName(s.Name)
}

// InventoryName is the ConfigMap, in the HC's namespace, that holds the
// inventory of the HC of the same name under key inventory.json.
func InventoryName(hcName string) string { return "converge-inventory-" + hcName }

// inventoryJSON is the document under the ConfigMap's key inventory.json:
// {"revision":…,"entries":[{"id","v","d","rv","c"}…]}, the revision
// omitted when empty. Embedding the API type keeps the entries' keys
// those of v1alpha1.InventoryEntry.
type inventoryJSON struct {
	Revision string `json:"revision,omitempty"`
	v1alpha1.Inventory
}

// encodeInventory returns the inventory.json of st.
func encodeInventory(st StoredInventory) ([]byte, error) {
	doc := inventoryJSON{Revision: st.Revision}
	if st.Inventory != nil {
		doc.Inventory = *st.Inventory
	}
	return json.Marshal(doc)
}

// decodeInventory reads an inventory.json.
func decodeInventory(data []byte) (StoredInventory, error) {
	var doc inventoryJSON
	if err := json.Unmarshal(data, &doc); err != nil {
		return StoredInventory{}, err
	}
	return StoredInventory{Inventory: &doc.Inventory, Revision: doc.Revision}, nil
}

// loadInventory reads the inventory ConfigMap namespace/cmName; a
// missing ConfigMap (or namespace) gives a zero StoredInventory and no
// error.
func loadInventory(ctx context.Context, r client.Reader, namespace, cmName string) (StoredInventory, error) {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cmName}, cm)
	if apierrors.IsNotFound(err) {
		return StoredInventory{}, nil
	}
	if err != nil {
		return StoredInventory{}, fmt.Errorf("reading inventory ConfigMap %s/%s: %w", namespace, cmName, err)
	}
	st, err := decodeInventory([]byte(cm.Data["inventory.json"]))
	if err != nil {
		return StoredInventory{}, fmt.Errorf("inventory ConfigMap %s/%s: %w", namespace, cmName, err)
	}
	return st, nil
}

// saveInventory writes next to the ConfigMap namespace/cmName (labelled
// converge.dev/inventory: owner) with server-side apply as manager, unless
// it equals prev. An inventory with no entries (after Uninstall) deletes
// the ConfigMap instead (a missing ConfigMap or namespace is fine). It
// reports whether it wrote.
func saveInventory(ctx context.Context, c client.Client, namespace, cmName, owner, manager string, prev, next StoredInventory) (bool, error) {
	if next.Inventory != nil && len(next.Inventory.Entries) == 0 {
		if prev.Inventory == nil {
			return false, nil
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cmName}}
		if err := c.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting inventory ConfigMap %s/%s: %w", namespace, cmName, err)
		}
		return true, nil
	}
	data, err := encodeInventory(next)
	if err != nil {
		return false, err
	}
	if prev.Inventory != nil {
		old, _ := encodeInventory(prev)
		if string(old) == string(data) {
			return false, nil
		}
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cmName,
			Labels: map[string]string{OwnerGroup + "/inventory": owner}},
		Data: map[string]string{"inventory.json": string(data)},
	}
	if err := c.Patch(ctx, cm, client.Apply, client.FieldOwner(manager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("writing inventory ConfigMap %s/%s: %w", namespace, cmName, err)
	}
	return true, nil
}
