package aggregated

import (
	"context"
	"encoding/base64"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var apiServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// APIService gives the APIService (api.APIServiceName) that routes the
// API's group version to port of the Service svc, trusting the PEM
// caBundle (none: left to the certificate Manager's injection), with the
// API's priorities and component label.
func APIService(api API, svc types.NamespacedName, port int32, caBundle []byte) *unstructured.Unstructured {
	spec := map[string]any{
		"group":                api.GroupVersion.Group,
		"version":              api.GroupVersion.Version,
		"groupPriorityMinimum": int64(api.GroupPriorityMinimum),
		"versionPriority":      int64(api.VersionPriority),
		"service":              map[string]any{"namespace": svc.Namespace, "name": svc.Name, "port": int64(port)},
	}
	if len(caBundle) > 0 {
		spec["caBundle"] = base64.StdEncoding.EncodeToString(caBundle)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(apiServiceGVK)
	u.SetName(api.APIServiceName())
	u.SetLabels(map[string]string{"app.kubernetes.io/component": api.Component, "app.kubernetes.io/managed-by": "converge"})
	return u
}

// Register creates or updates the API's APIService (APIService) with
// server-side apply as fieldOwner, forcing ownership of its fields.
func Register(ctx context.Context, c client.Client, api API, svc types.NamespacedName, port int32, caBundle []byte, fieldOwner string) error {
	obj := client.ApplyConfigurationFromUnstructured(APIService(api, svc, port, caBundle))
	if err := c.Apply(ctx, obj, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("APIService %s: applying: %w", api.APIServiceName(), err)
	}
	return nil
}

// Unregister deletes the APIService name, so that the API server stops
// routing (and discovery stops failing on) its group once the role is
// gone; one that does not exist is fine.
func Unregister(ctx context.Context, c client.Client, name string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiServiceGVK)
	u.SetName(name)
	if err := c.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("APIService %s: deleting: %w", name, err)
	}
	return nil
}
