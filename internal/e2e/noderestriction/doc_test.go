// Package noderestriction_test runs the node agents' node restriction
// policies (components/common #NodeRestriction: a
// ValidatingAdmissionPolicy per node role, derived with its roles) on a
// real kube-apiserver and etcd, with the tokens a kubelet would give the
// agents: a ServiceAccount token bound to the agent's Pod on a node, whose
// user carries the node's name. It renders the roles of the four kinds
// that have node agents (KubeVirt: the VM agent; NetworkAddonsConfig:
// bridge-marker; CDI: the cdi-importer; HostPathProvisioner: the hostpath
// CSI provisioner) with the graph engine, as the native operators do,
// applies their ServiceAccounts, RBAC and policies, and acts as each agent
// — through the agents' own code where it runs without a node
// (agent.RegisterNode, endpoint.Publish, agent.APISource) and through
// single requests otherwise — checking what its own node may do and what
// another node's may not. The API server refuses a policy whose CEL does
// not compile when it is created, so applying them proves that; every
// validation is evaluated on requests it must admit (an expression that
// fails to evaluate refuses them: failurePolicy Fail) and on requests it
// must refuse. The policies are not type-checked against the kinds'
// schemas: they match all API versions ("*", as KubeVirt's policy), and
// kube-controller-manager's policy status controller, tried here, warned
// of nothing even for a misspelt field.
//
// The test needs no root; it skips without the control-plane binaries in
// bin/ (internal/testing/controlplane).
package noderestriction_test
