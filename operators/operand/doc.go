// Package operand is what every native operator of converge-controller
// does, as upstream's virt-operator, cdi-operator,
// cluster-network-addons-operator and hostpath-provisioner-operator each do
// for their CR: given an operand kind (an Operator), it
//
//   - watches the CRs of that kind marked converge.dev/operator: native
//     (the graph marks every operand CR with its mode),
//   - derives the component's roles from each CR by evaluating the CUE
//     definition of the component (components/graph.cue Roles[kind],
//     graph.Engine.Roles) with the images converge-controller runs,
//   - applies them with server-side apply through reconciler.Pipeline
//     (field manager converge-<operator>, owner labels
//     <operator>.converge.dev/name|namespace, an inventory ConfigMap per
//     CR, prune of what the CR no longer derives),
//   - computes the CR's status from the real readiness of the workloads
//     it applied — DaemonSets and Deployments and their pods — as
//     Available, Progressing and Degraded conditions with upstream-style
//     reasons (Assess, Conditions), observedGeneration, phase and the
//     operator, target and observed versions in the kind's own field
//     names (StatusFields),
//   - removes everything derived when the CR is deleted or leaves native
//     mode, through a finalizer and the inventory (cluster-scoped objects
//     cannot carry an ownerReference to a CR),
//   - and gates the component's converge-controller roles (Role): each
//     starts once a native CR wanting it exists (Gates.Wait) and, when
//     the last one goes, the manager ends with ErrRoleGone so the pod
//     restarts without it.
//
// A new operator is a thin package: its Operator (name, kind, CRD, status
// fields, roles) and its CUE definition (#Roles in its component).
package operand
