package netattach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotFound is wrapped by a ConfigSource when the
// NetworkAttachmentDefinition does not exist.
var ErrNotFound = errors.New("not found")

// NADGroupVersionKind is the NetworkAttachmentDefinition's type
// (k8snetworkplumbingwg's CRD, as multus reads it).
var NADGroupVersionKind = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// ConfigSource gives the CNI configuration (spec.config of a
// NetworkAttachmentDefinition: one plugin configuration or a
// configuration list, JSON) of the NetworkAttachmentDefinition
// namespace/name. A missing one is an error wrapping ErrNotFound.
type ConfigSource interface {
	Config(ctx context.Context, namespace, name string) ([]byte, error)
}

// DirSource reads NetworkAttachmentDefinition configs from files, for
// nodes without an API server (converge-node vm --vmi-file): the config
// of namespace/name is <Dir>/<namespace>/<name>.conf (or .conflist or
// .json, tried in that order), holding exactly what spec.config holds.
type DirSource struct{ Dir string }

// Config reads the file of namespace/name.
func (s DirSource) Config(_ context.Context, namespace, name string) ([]byte, error) {
	base := filepath.Join(s.Dir, namespace, name)
	for _, ext := range []string{".conf", ".conflist", ".json"} {
		b, err := os.ReadFile(base + ext)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", namespace, name, err)
		}
	}
	return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w: expected %s.conf, .conflist or .json", namespace, name, ErrNotFound, base)
}

// APISource reads NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1,
// unstructured, so no typed client is needed) through Client.
type APISource struct{ Client client.Reader }

// Config gives spec.config of namespace/name; a missing object wraps
// ErrNotFound, an object without spec.config is an error.
func (s APISource) Config(ctx context.Context, namespace, name string) ([]byte, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(NADGroupVersionKind)
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", namespace, name, ErrNotFound)
		}
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", namespace, name, err)
	}
	cfg, ok, err := unstructured.NestedString(u.Object, "spec", "config")
	if err != nil || !ok || cfg == "" {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: spec.config: expected a CNI configuration (JSON string)", namespace, name)
	}
	return []byte(cfg), nil
}
