package endpoint

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
)

// Publish records e on the Node nodeName as s's two annotations with a
// JSON merge patch, leaving every other annotation alone (the agent needs
// patch on nodes). Errors name the Node: "Node n1: publishing console
// endpoint: …".
func Publish(ctx context.Context, c client.Client, s nodeendpoint.Service, nodeName string, e nodeendpoint.Endpoint) error {
	if err := s.Validate(e); err != nil {
		return fmt.Errorf("Node %s: publishing %s endpoint: %w", nodeName, s.Name, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		s.AddressAnnotation: e.Address, s.CertSHA256Annotation: e.CertSHA256}}})
	if err != nil {
		return err
	}
	node := &corev1.Node{}
	node.Name = nodeName
	if err := c.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("Node %s: publishing %s endpoint: %w", nodeName, s.Name, err)
	}
	return nil
}
