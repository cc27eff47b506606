package hppoperator

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/operand"
)

// Name is the operator's name (operand.Operator.Name): field manager
// converge-hostpath-provisioner-operator, owner labels
// hostpath-provisioner-operator.converge.dev/….
const Name = "hostpath-provisioner-operator"

// RoleSnapshotController is the operator's converge-controller role: the
// snapshot controller (operators/hostpath/snapshotcontroller), wanted by
// every native HostPathProvisioner.
const RoleSnapshotController = "snapshot-controller"

// CRD is the HostPathProvisioner CRD's name.
const CRD = "hostpathprovisioners.hostpathprovisioner.kubevirt.io"

// GVK is the HostPathProvisioner kind, cluster-scoped.
var GVK = schema.GroupVersionKind{Group: "hostpathprovisioner.kubevirt.io", Version: "v1beta1", Kind: "HostPathProvisioner"}

// Operator gives the HostPathProvisioner operator: HostPathProvisioner CRs
// (cluster-scoped, roles in operand.Options.Namespace) → components/hpp
// #Roles, status in the fields hostpath-provisioner-operator writes
// (conditions, observedGeneration, phase, operatorVersion, targetVersion,
// observedVersion), and as input the names of the nodes its pool workers
// run on (PoolNodes; re-derived when a Node changes). Its one
// converge-controller role is RoleSnapshotController; the provisioner,
// resizer and csi-snapshotter run in the node DaemonSet, the pool
// mounters in the pool workers.
func Operator() operand.Operator {
	return operand.Operator{
		Name:          Name,
		GVK:           GVK,
		CRD:           CRD,
		ClusterScoped: true,
		Status:        operand.SDKStatusFields(),
		Inputs:        &operand.Inputs{Watch: []schema.GroupVersionKind{NodeGVK}, Read: readInputs},
		Roles:         []operand.Role{{Name: RoleSnapshotController}},
	}
}

// Setup adds the HostPathProvisioner operator to mgr (operand.Setup) and
// gives its role gates (RoleSnapshotController).
func Setup(mgr manager.Manager, engine *graph.Engine, oo operand.Options) (*operand.Gates, error) {
	return operand.Setup(mgr, engine, Operator(), oo)
}
