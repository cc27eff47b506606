// Package addonsoperator is converge's network operator, upstream's
// cluster-network-addons-operator (CNAO) for converge: it consumes the
// NetworkAddonsConfig marked native through the operand framework. From
// spec.linuxBridge it derives bridge-marker with cni-install
// (components/cnao #Roles), placed by spec.placementConfiguration.workloads,
// in the operator's namespace (the CR is cluster-scoped), applies it and
// reports the CR's status as CNAO does (Available/Progressing/Degraded,
// observedGeneration, operatorVersion, targetVersion, observedVersion). It
// gates converge-controller's MAC pool (operators/network/macpool, the
// kubemacpool role) on a native NetworkAddonsConfig with spec.kubeMacPool,
// whose range the pool takes. docs/native-operators.md lists every field
// converge honours, refuses or accepts without effect.
package addonsoperator
