package virtapi

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

// APIServiceName is the APIService of subresources.kubevirt.io/v1, named
// as virt-operator names KubeVirt's (v1.subresources.kubevirt.io).
const APIServiceName = "v1." + "subresources.kubevirt.io"

var apiServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// APIService gives the APIService that routes subresources.kubevirt.io/v1
// to port of the Service svc, trusting the PEM caBundle (none: left to the
// certificate Manager's injection), with the priorities virt-operator
// gives KubeVirt's (pkg/virt-operator/resource/generate/components/
// apiservices.go: groupPriorityMinimum 1000, versionPriority 15).
func APIService(svc types.NamespacedName, port int32, caBundle []byte) *unstructured.Unstructured {
	spec := map[string]any{
		"group":                GroupVersion.Group,
		"version":              GroupVersion.Version,
		"groupPriorityMinimum": int64(1000),
		"versionPriority":      int64(15),
		"service":              map[string]any{"namespace": svc.Namespace, "name": svc.Name, "port": int64(port)},
	}
	if len(caBundle) > 0 {
		spec["caBundle"] = base64.StdEncoding.EncodeToString(caBundle)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(apiServiceGVK)
	u.SetName(APIServiceName)
	u.SetLabels(map[string]string{"app.kubernetes.io/component": "virt-api", "app.kubernetes.io/managed-by": "converge"})
	return u
}

// Register creates or updates the APIService (APIService) with
// server-side apply as fieldOwner, forcing ownership of its fields.
func Register(ctx context.Context, c client.Client, svc types.NamespacedName, port int32, caBundle []byte, fieldOwner string) error {
	obj := client.ApplyConfigurationFromUnstructured(APIService(svc, port, caBundle))
	if err := c.Apply(ctx, obj, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("APIService %s: applying: %w", APIServiceName, err)
	}
	return nil
}

// Unregister deletes the APIService, so that the API server stops routing
// (and discovery stops failing on) subresources.kubevirt.io once the role
// is gone; one that does not exist is fine.
func Unregister(ctx context.Context, c client.Client) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiServiceGVK)
	u.SetName(APIServiceName)
	if err := c.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("APIService %s: deleting: %w", APIServiceName, err)
	}
	return nil
}
