package cdioperator

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/operand"
)

// Name is the operator's name (operand.Operator.Name): field manager
// converge-cdi-operator, owner labels cdi-operator.converge.dev/….
const Name = "cdi-operator"

// CRD is the CDI CRD's name.
const CRD = "cdis.cdi.kubevirt.io"

// Roles in converge-controller (operand.Role names): CDI's cdi-deployment
// (the DataVolume controller, operators/cdi/datavolume) and cdi-apiserver
// (the upload token issuer, operators/cdi/uploadtoken).
const (
	RoleController = "cdi-controller"
	RoleAPIServer  = "cdi-apiserver"
)

// GVK is the CDI kind, cluster-scoped.
var GVK = schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "CDI"}

// HostPathProvisioner is the kind whose storage pools the importer serves,
// and its CRD.
var (
	HostPathProvisioner    = schema.GroupVersionKind{Group: "hostpathprovisioner.kubevirt.io", Version: "v1beta1", Kind: "HostPathProvisioner"}
	HostPathProvisionerCRD = "hostpathprovisioners.hostpathprovisioner.kubevirt.io"
)

// Options are what the CDI operator needs besides operand.Options.
type Options struct {
	// UploadKeysNamespace is where converge-controller's upload token
	// issuer publishes its public keys (uploadtoken.Options.PublicKeys):
	// the importer's --upload-keys-namespace.
	UploadKeysNamespace string
	// APIServerStop, when set, is the cdi-apiserver role's Stop: it
	// deletes the DataVolume admission webhook's configuration
	// (operand.DeleteOnStop), so that no failurePolicy Fail hook calls a
	// process that no longer registers it.
	APIServerStop func(ctx context.Context) error
}

// Operator gives the CDI operator: CDI CRs (cluster-scoped, roles in
// operand.Options.Namespace) → components/cdi #Roles, status in the
// controller-lifecycle-operator-sdk's fields, as cdi-operator writes them,
// the converge-controller roles RoleController and RoleAPIServer (whose
// Stop is o.APIServerStop), and as
// inputs the storage pools of the native HostPathProvisioner (re-derived
// when a HostPathProvisioner changes) and o.UploadKeysNamespace.
func Operator(o Options) operand.Operator {
	return operand.Operator{
		Name:          Name,
		GVK:           GVK,
		CRD:           CRD,
		ClusterScoped: true,
		Status:        operand.SDKStatusFields(),
		Roles:         []operand.Role{{Name: RoleController}, {Name: RoleAPIServer, Stop: o.APIServerStop}},
		Inputs: &operand.Inputs{
			CRDs:  []string{HostPathProvisionerCRD},
			Watch: []schema.GroupVersionKind{HostPathProvisioner},
			Read: func(ctx context.Context, r client.Reader, _ *unstructured.Unstructured) (map[string]any, error) {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(HostPathProvisioner.GroupVersion().WithKind(HostPathProvisioner.Kind + "List"))
				if err := r.List(ctx, list); err != nil {
					return nil, fmt.Errorf("listing the HostPathProvisioners: %w", err)
				}
				return map[string]any{"pools": Pools(list.Items), "uploadKeysNamespace": o.UploadKeysNamespace}, nil
			},
		},
	}
}

// Setup adds the CDI operator to mgr (operand.Setup) and gives the gates
// of its converge-controller roles. o.UploadKeysNamespace is required.
func Setup(mgr manager.Manager, engine *graph.Engine, o Options, oo operand.Options) (*operand.Gates, error) {
	if o.UploadKeysNamespace == "" {
		return nil, errors.New("cdi-operator: Options.UploadKeysNamespace (the upload token issuer's public keys namespace) is empty")
	}
	return operand.Setup(mgr, engine, Operator(o), oo)
}

// Active gives a function that reads, through r, the CDI CR the operator
// deploys: the native one created first (then by name), not being
// deleted; nil when there is none. The DataVolume controller follows its
// spec.config (datavolume.Options.CDI).
func Active(r client.Reader) func(ctx context.Context) (*unstructured.Unstructured, error) {
	return func(ctx context.Context) (*unstructured.Unstructured, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(GVK.GroupVersion().WithKind(GVK.Kind + "List"))
		if err := r.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing the CDI CRs: %w", err)
		}
		active := oldestNative(list.Items)
		if active == nil {
			return nil, nil
		}
		return active.DeepCopy(), nil
	}
}

// oldestNative gives the native object of objs created first (then by
// name) that is not being deleted, nil when none.
func oldestNative(objs []unstructured.Unstructured) *unstructured.Unstructured {
	var out *unstructured.Unstructured
	for i := range objs {
		o := &objs[i]
		if o.GetAnnotations()[operand.NativeAnnotation] != operand.Native || o.GetDeletionTimestamp() != nil {
			continue
		}
		if out == nil {
			out = o
			continue
		}
		to, tb := o.GetCreationTimestamp(), out.GetCreationTimestamp()
		if to.Before(&tb) || (to.Equal(&tb) && o.GetName() < out.GetName()) {
			out = o
		}
	}
	return out
}

// Pools gives the storage pools the cdi-importer serves, from hpps (the
// HostPathProvisioners of the cluster): those of the native one created
// first (the one converge's HostPathProvisioner operator deploys), not
// being deleted, that have a host path and no pvcTemplate, as
// {name, path} in its order (the first is the driver's default). None
// gives an empty list.
func Pools(hpps []unstructured.Unstructured) []any {
	out := []any{}
	active := oldestNative(hpps)
	if active == nil {
		return out
	}
	pools, _, _ := unstructured.NestedSlice(active.Object, "spec", "storagePools")
	for _, p := range pools {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		path, _ := m["path"].(string)
		if _, template := m["pvcTemplate"]; template || name == "" || path == "" {
			continue
		}
		out = append(out, map[string]any{"name": name, "path": path})
	}
	return out
}
