package reconciler

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/inventory"
)

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
// It reports whether it wrote.
func saveInventory(ctx context.Context, c client.Client, namespace, name string, prev, inv *inventory.Inventory) (bool, error) {
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
