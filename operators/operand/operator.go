package operand

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NativeAnnotation and Native are the annotation and value that mark an
// operand CR as native (components/graph.cue OperatorAnnotation): the
// graph writes converge.dev/operator: native or external on every operand
// CR, and the operators act on the native ones only.
const (
	NativeAnnotation = "converge.dev/operator"
	Native           = "native"
)

// NamespaceAnnotation, on a cluster-scoped operand CR, names the
// namespace its roles go to (components/graph.cue
// OperandNamespaceAnnotation: the HC's namespace, as the upstream
// operators deploy into HCO's); without it they go to Options.Namespace.
const NamespaceAnnotation = "converge.dev/operand-namespace"

// Operator is what makes one native operator: everything else — watch,
// derive, apply, prune, status, finalizer, role gates — is this package's.
type Operator struct {
	// Name names the operator after its upstream counterpart
	// ("virt-operator"). It gives the field manager converge-<Name>, the
	// owner labels <Name>.converge.dev/name and …/namespace, the finalizer
	// <Name>.converge.dev/roles, the inventory ConfigMap
	// converge-<Name>-<CR name> and the controller's name.
	Name string
	// GVK is the operand CR's kind (KubeVirt kubevirt.io/v1); components/
	// graph.cue Roles must hold a definition for GVK.Kind.
	GVK schema.GroupVersionKind
	// CRD is the operand CRD's name ("kubevirts.kubevirt.io"); the
	// operator starts once it is established.
	CRD string
	// ClusterScoped: the CR is cluster-scoped, so its roles go to the
	// namespace its NamespaceAnnotation names, else Options.Namespace; a
	// namespaced CR's go to its own namespace.
	ClusterScoped bool
	// Singleton: one CR of the kind is deployed, the oldest native one
	// (by creation, then namespace and name); another is not and reads
	// Degraded, reason ExistingDeployment, as virt-operator treats a second
	// KubeVirt.
	Singleton bool
	// Status lays the computed status out in the kind's field names.
	Status StatusFields
	// Roles are the component's converge-controller roles, gated on the
	// native CRs that want them (Gates).
	Roles []Role
	// Inputs, when set, are what the roles take from the cluster besides
	// the CR (#RolesOf inputs).
	Inputs *Inputs
}

// Role is one converge-controller role of a component (virt-controller,
// the VM validation webhook, the MAC pool): it may run only while a
// native CR wanting it exists. Setup's Gates give its gate; when the last
// CR wanting it goes, Stop runs and the manager ends with ErrRoleGone, so
// that the process restarts without the role (controller-runtime cannot
// remove a controller from a running manager).
type Role struct {
	// Name names the role in Gates.Wait and in errors ("virt-controller").
	Name string
	// Wants reports whether a native CR asks for the role; nil means
	// every native CR does.
	Wants func(cr *unstructured.Unstructured) bool
	// Stop, when set, removes what the role registered in the cluster
	// (a webhook configuration) before the manager ends.
	Stop func(ctx context.Context) error
}

// Options configure Setup.
type Options struct {
	// Images are the images the roles run, by name: "node" is the
	// converge-node image (converge-controller --node-image).
	Images map[string]string
	// Namespace receives the roles of cluster-scoped CRs and their
	// inventory ConfigMaps, as upstream operators deploy into their own
	// namespace.
	Namespace string
	// Version is converge's version (internal/cli.Version): the CRs'
	// operator and target version.
	Version string
	// Poll is how often the operator looks for its CRD before it starts,
	// and how soon a CR whose roles are not ready is looked at again (the
	// watches see the workloads and pods change; a pod that cannot be
	// created shows only in events).
	Poll time.Duration
	// WaitTimeout bounds the wait for the roles' objects to be gone when
	// a CR is deleted.
	WaitTimeout time.Duration
	// SkipNameValidation lets tests start several managers with the same
	// controller in one process.
	SkipNameValidation bool
}

// DefaultOptions polls for the CRD every 5 s and waits at most 2 min for
// the roles to be deleted; Images, Namespace and Version are the
// caller's.
func DefaultOptions() Options {
	return Options{Poll: 5 * time.Second, WaitTimeout: 2 * time.Minute}
}

// fieldManager, ownerGroup, finalizer and inventoryName derive the
// operator's identities from its Name (see Operator.Name).
func (op Operator) fieldManager() string { return "converge-" + op.Name }
func (op Operator) ownerGroup() string   { return op.Name + ".converge.dev" }
func (op Operator) finalizer() string    { return op.Name + ".converge.dev/roles" }
func (op Operator) inventoryName(cr string) string {
	return "converge-" + op.Name + "-" + cr
}

// isNative reports whether cr is marked native.
func isNative(cr *unstructured.Unstructured) bool {
	return cr.GetAnnotations()[NativeAnnotation] == Native
}
