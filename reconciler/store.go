package reconciler

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/reconciler/inventory"
)

// InventoryStore keeps the inventory of one sync target between syncs.
// The Pipeline calls Load once at the start of a sync and Save once at
// its end, also after a failed apply (with the previous inventory plus
// what was applied), never after a failed fetch or render.
type InventoryStore interface {
	// Load returns the saved inventory, or nil, nil when none was saved.
	Load(ctx context.Context) (*inventory.Inventory, error)
	// Save stores inv. prev is what Load returned, so an implementation
	// can skip a write that changes nothing; it reports whether it wrote.
	Save(ctx context.Context, prev, inv *inventory.Inventory) (bool, error)
}

// ConfigMapStore keeps the inventory in the ConfigMap InventoryName(Name)
// in Namespace (the HC's), under key inventory.json: the store of
// `converge apply`, which has no Sync object. Saving an empty inventory
// deletes the ConfigMap.
type ConfigMapStore struct {
	Client    client.Client
	Reader    client.Reader
	Namespace string
	Name      string
}

// Load implements InventoryStore.
func (s ConfigMapStore) Load(ctx context.Context) (*inventory.Inventory, error) {
	return loadInventory(ctx, s.Reader, s.Namespace, s.Name)
}

// Save implements InventoryStore.
func (s ConfigMapStore) Save(ctx context.Context, prev, inv *inventory.Inventory) (bool, error) {
	return saveInventory(ctx, s.Client, s.Namespace, s.Name, prev, inv)
}

// InventoryName is the ConfigMap, in the HC's namespace, that holds the
// inventory of the HC of the same name under key inventory.json.
func InventoryName(hcName string) string { return "converge-inventory-" + hcName }

// loadInventory reads the inventory of the HC namespace/name; a missing
// ConfigMap (or namespace) gives nil, nil.
func loadInventory(ctx context.Context, r client.Reader, namespace, name string) (*inventory.Inventory, error) {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: InventoryName(name)}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading inventory ConfigMap %s/%s: %w", namespace, InventoryName(name), err)
	}
	inv := &inventory.Inventory{}
	if err := json.Unmarshal([]byte(cm.Data["inventory.json"]), inv); err != nil {
		return nil, fmt.Errorf("inventory ConfigMap %s/%s: %w", namespace, InventoryName(name), err)
	}
	return inv, nil
}

// saveInventory writes inv with server-side apply unless it equals prev.
// An inventory with no entries (after Uninstall) deletes the ConfigMap
// instead (a missing ConfigMap or namespace is fine). It reports whether
// it wrote.
func saveInventory(ctx context.Context, c client.Client, namespace, name string, prev, inv *inventory.Inventory) (bool, error) {
	if inv != nil && len(inv.Entries) == 0 {
		if prev == nil {
			return false, nil
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: InventoryName(name)}}
		if err := c.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting inventory ConfigMap %s/%s: %w", namespace, InventoryName(name), err)
		}
		return true, nil
	}
	data, err := json.Marshal(inv)
	if err != nil {
		return false, err
	}
	if prev != nil {
		old, _ := json.Marshal(prev)
		if string(old) == string(data) {
			return false, nil
		}
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: InventoryName(name),
			Labels: map[string]string{OwnerGroup + "/inventory": name}},
		Data: map[string]string{"inventory.json": string(data)},
	}
	if err := c.Patch(ctx, cm, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("writing inventory ConfigMap %s/%s: %w", namespace, InventoryName(name), err)
	}
	return true, nil
}
