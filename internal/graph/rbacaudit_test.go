package graph_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/graph"
)

// grant is one permission: a verb on a resource (with "/subresource") of
// an API group ("" for core).
type grant struct{ group, resource, verb string }

func (g grant) String() string {
	group := g.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s %s", g.verb, group, g.resource)
}

// call is an API call a node agent's code makes, and where.
type call struct {
	grant
	where string
}

// calls gives a call of verbs on group/resource made at where.
func calls(group, resource, where string, verbs ...string) []call {
	var out []call
	for _, v := range verbs {
		out = append(out, call{grant{group, resource, v}, where})
	}
	return out
}

// nodeRoleCalls are the API calls each node role's ServiceAccount makes,
// read from the code, with where each is made. The roles' RBAC must grant
// exactly these (TestRolesRBACAudit); converge-controller's role is the
// apply path (every right, components/controller) and is not audited.
var nodeRoleCalls = map[string][][]call{
	// converge-node vm (cmd/converge-node vm.go runVMFromAPI). Not here:
	// nodes update and the Ready condition of standInForKubelet
	// (nodeplane/vm/agent node.go), made only on a Node without a kubelet,
	// i.e. never under the DaemonSet, whose Pod a kubelet runs.
	"converge-vm-agent": {
		calls("kubevirt.io", "virtualmachineinstances", "nodeplane/vm/agent apisource.go NewAPISource: the caches (label selectors)", "list", "watch"),
		calls("kubevirt.io", "virtualmachineinstances", "apisource.go store, finalizer (uncached Get); nodeplane/vm/console server.go", "get"),
		calls("kubevirt.io", "virtualmachineinstances", "apisource.go finalizer: add/remove the agent's finalizer", "update"),
		calls("kubevirt.io", "virtualmachineinstances/status", "apisource.go store: merge patch of the status", "patch"),
		calls("", "nodes", "node.go RegisterNode: Create, AlreadyExists taken", "create"),
		calls("", "nodes", "node.go RegisterNode: labels and annotations; nodeplane/endpoint publish.go Publish: console endpoint", "patch"),
		calls("", "nodes", "nodeplane/endpoint run.go Run: the Node's addresses", "get"),
		calls("", "nodes/status", "node.go writeConditions: the KVM condition", "patch"),
		calls("k8s.cni.cncf.io", "network-attachment-definitions", "nodeplane/network/netattach source.go APISource.Config", "get"),
		calls("", "persistentvolumeclaims", "nodeplane/vm/vmdisks api.go PVCResolver.Resolve", "get"),
		calls("", "persistentvolumes", "api.go PVCResolver.Resolve", "get"),
		calls("cdi.kubevirt.io", "datavolumes", "api.go PVCResolver.Resolve: a dataVolume disk waits for Succeeded", "get"),
		calls("", "secrets", "api.go APIObjects.Secret: cloud-init and pull secrets", "get"),
		calls("", "configmaps", "api.go APIObjects.ConfigMap: configMap disks", "get"),
		calls("authentication.k8s.io", "tokenreviews", "nodeplane/vm/console auth.go: console clients (system:auth-delegator)", "create"),
		calls("authorization.k8s.io", "subjectaccessreviews", "console auth.go: virtualmachineinstances/console (system:auth-delegator)", "create"),
	},
	// converge-node bridge-marker (cmd/converge-node cni.go: an uncached
	// client).
	"converge-bridge-marker": {
		calls("", "nodes", "nodeplane/network/bridgemarker marker.go Sync", "get"),
		calls("", "nodes/status", "marker.go Sync: capacity and allocatable of the bridges", "patch"),
	},
	// converge-node cdi-importer (cmd/converge-node cdiimport.go): a
	// controller-runtime manager whose cached client lists and watches what
	// it reads, with the upload server in the same process.
	"converge-cdi-importer": {
		calls("cdi.kubevirt.io", "datavolumes", "nodeplane/cdi/importcontroller agent.go For, uploadserver run.go For (the cache)", "get", "list", "watch"),
		calls("cdi.kubevirt.io", "datavolumes/status", "importcontroller status.go UpdateStatus (import and upload)", "update"),
		calls("", "persistentvolumeclaims", "agent.go Watches, reconciler.go Get (the cache); uploadserver server.go (APIReader)", "get", "list", "watch"),
		calls("", "persistentvolumes", "reconciler.go, uploadserver ready.go Get (the cache); server.go (APIReader)", "get", "list", "watch"),
		calls("", "nodes", "agent.go labelNode Get (the cache); nodeplane/endpoint run.go Run (APIReader)", "get", "list", "watch"),
		calls("", "nodes", "agent.go labelNode: its label; nodeplane/endpoint publish.go Publish: upload endpoint", "patch"),
		calls("", "events", "agent.go GetEventRecorderFor: client-go record's EventSinkImpl", "create", "patch"),
		calls("", "configmaps", "reconciler.go readCA certConfigMap; api/uploadtoken keys.go PublicKeys (APIReader)", "get"),
		calls("", "secrets", "importcontroller registry.go registrySource: spec.source.registry.secretRef (APIReader)", "get"),
		calls("apiextensions.k8s.io", "customresourcedefinitions", "importcontroller watch.go WaitForCRD (internal/crdwait)", "get"),
	},
	// converge-node hostpath-csi --provision (nodeplane/csi/provisioner on
	// sig-storage-lib-external-provisioner v13, leader election off), its
	// resizer (nodeplane/csi/resizer: the same informers, PV patch) and its
	// csi-snapshotter (nodeplane/csi/snapshotter: external-snapshotter
	// v8.4.0 pkg/sidecar-controller, group snapshots off; secrets only for
	// a class with secret parameters, which the driver takes none of).
	"hostpath-provisioner-admin-csi": {
		calls("", "persistentvolumes", "the library's informer (controller.go NewProvisionController)", "list", "watch"),
		calls("", "persistentvolumes", "volume_store.go: the provisioned PV", "create"),
		calls("", "persistentvolumes", "controller.go patchPersistentVolumeWithFinalizers; nodeplane/csi/resizer sync.go: spec.capacity", "patch"),
		calls("", "persistentvolumes", "controller.go deleteVolumeOperation", "delete"),
		calls("", "persistentvolumeclaims", "the library's informer", "list", "watch"),
		calls("", "persistentvolumeclaims", "controller.go rescheduleProvisioning: removes the selected node", "update"),
		calls("", "persistentvolumeclaims/status", "nodeplane/csi/resizer sync.go updateStatus: the resize's conditions and capacity", "update"),
		calls("storage.k8s.io", "storageclasses", "the library's informer", "list", "watch"),
		calls("", "events", "controller.go: record's EventSinkImpl; the sidecar's snapshot_controller_base.go broadcaster", "create", "patch"),
		calls("snapshot.storage.k8s.io", "volumesnapshots", "nodeplane/csi/provisioner restore.go snapshotSource", "get"),
		calls("snapshot.storage.k8s.io", "volumesnapshotcontents", "restore.go snapshotSource; sidecar snapshot_controller.go clearVolumeContentStatus, updateSnapshotContentStatus", "get"),
		calls("snapshot.storage.k8s.io", "volumesnapshotcontents", "the sidecar's informer (managed-by label of its node)", "list", "watch"),
		calls("snapshot.storage.k8s.io", "volumesnapshotcontents", "sidecar snapshot_controller.go: setAnnVolumeSnapshotBeingCreated, removeAnnVolumeSnapshotBeingCreated, removeContentFinalizer (utils.PatchVolumeSnapshotContent)", "patch"),
		calls("snapshot.storage.k8s.io", "volumesnapshotcontents/status", "sidecar snapshot_controller.go updateContentErrorStatusWithEvent, updateSnapshotContentStatus (patch of status)", "patch"),
		calls("snapshot.storage.k8s.io", "volumesnapshotcontents/status", "sidecar snapshot_controller.go clearVolumeContentStatus (UpdateStatus)", "update"),
		calls("snapshot.storage.k8s.io", "volumesnapshotclasses", "the sidecar's informer", "list", "watch"),
	},
}

// builtinRoles are the rules of the Kubernetes ClusterRoles the node roles
// bind (kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy
// policy.go).
var builtinRoles = map[string][]grant{
	"system:auth-delegator": {
		{"authentication.k8s.io", "tokenreviews", "create"},
		{"authorization.k8s.io", "subjectaccessreviews", "create"},
	},
}

// TestRolesRBACAudit derives the node roles of the four operand kinds and
// checks, for each ServiceAccount they bind, that the ClusterRoles bound
// to it grant exactly the calls nodeRoleCalls lists: a call not granted
// fails (the agent would be refused), a grant no call uses fails (the
// agent could do more than it does). A ClusterRole or binding the table
// does not know fails too, so a new role is audited before it ships.
func TestRolesRBACAudit(t *testing.T) {
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	clusterRoles := map[string][]grant{}
	bound := map[string][]string{} // ServiceAccount name → ClusterRoles
	for _, o := range nodeRoles(t, e) {
		if userRole(o) {
			continue
		}
		switch o.GetKind() {
		case "ClusterRole":
			clusterRoles[o.GetName()] = rulesOf(t, o)
		case "ClusterRoleBinding":
			ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				sa := s.(map[string]any)["name"].(string)
				bound[sa] = append(bound[sa], ref)
			}
		case "Role", "RoleBinding":
			t.Errorf("%s %s: namespaced RBAC of a node role is not audited; add it to TestRolesRBACAudit", o.GetKind(), o.GetName())
		}
	}
	for sa := range bound {
		if _, ok := nodeRoleCalls[sa]; !ok {
			t.Errorf("ServiceAccount %s is bound to %v but its calls are not audited (nodeRoleCalls)", sa, bound[sa])
		}
	}
	for name := range clusterRoles {
		audited := false
		for sa, roles := range bound {
			_, known := nodeRoleCalls[sa]
			audited = audited || known && contains(roles, name)
		}
		if !audited {
			t.Errorf("ClusterRole %s is bound to no audited ServiceAccount (nodeRoleCalls)", name)
		}
	}
	for sa, groups := range nodeRoleCalls {
		t.Run(sa, func(t *testing.T) {
			granted := map[grant]string{}
			for _, role := range bound[sa] {
				rules, ok := clusterRoles[role]
				if !ok {
					rules, ok = builtinRoles[role]
				}
				if !ok {
					t.Errorf("bound to ClusterRole %s, which the roles do not give and is no known built-in role", role)
				}
				for _, g := range rules {
					granted[g] = role
				}
			}
			needed := map[grant]string{}
			for _, cs := range groups {
				for _, c := range cs {
					needed[c.grant] = c.where
				}
			}
			for _, g := range sortedGrants(needed) {
				if _, ok := granted[g]; !ok {
					t.Errorf("not granted: %s, called by %s", g, needed[g])
				}
			}
			for _, g := range sortedGrants(granted) {
				if _, ok := needed[g]; !ok {
					t.Errorf("granted by ClusterRole %s but never called: %s", granted[g], g)
				}
			}
		})
	}
}

// userRole reports whether o is one of KubeVirt's user-facing ClusterRoles
// or their bindings (components/virt userroles.cue: kubevirt.io:admin,
// edit, view, default, migrate, instancetype.kubevirt.io:view): they bind
// users and groups, not a node role's ServiceAccount, and are KubeVirt's
// rule for rule (testdata/roles/virt/user-roles.txtar), and SSP's golden
// images roles (components/ssp roles.cue: os-images.kubevirt.io:view,
// edit), SSP's rule for rule (testdata/roles/ssp/templates.txtar).
func userRole(o *unstructured.Unstructured) bool {
	n := o.GetName()
	return strings.HasPrefix(n, "kubevirt.io:") || strings.HasPrefix(n, "instancetype.kubevirt.io:") || strings.HasPrefix(n, "os-images.kubevirt.io:")
}

// nodeRoles derives the roles of a native KubeVirt, NetworkAddonsConfig
// with linuxBridge, CDI and HostPathProvisioner, each with a storage pool,
// as their operators do.
func nodeRoles(t *testing.T, e *graph.Engine) []*unstructured.Unstructured {
	t.Helper()
	native := map[string]any{"converge.dev/operator": "native"}
	pools := []any{map[string]any{"name": "local", "path": "/var/hpvolumes"}}
	crs := []struct {
		cr     map[string]any
		inputs map[string]any
	}{
		{map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
			"metadata": map[string]any{"name": "kubevirt-kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged", "annotations": native}},
			map[string]any{"pools": pools}},
		{map[string]any{"apiVersion": "networkaddonsoperator.network.kubevirt.io/v1", "kind": "NetworkAddonsConfig",
			"metadata": map[string]any{"name": "cluster", "annotations": native}, "spec": map[string]any{"linuxBridge": map[string]any{}}}, nil},
		{map[string]any{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI",
			"metadata": map[string]any{"name": "cdi-kubevirt-hyperconverged", "annotations": native}},
			map[string]any{"pools": pools, "uploadKeysNamespace": "converge-system"}},
		{map[string]any{"apiVersion": "hostpathprovisioner.kubevirt.io/v1beta1", "kind": "HostPathProvisioner",
			"metadata": map[string]any{"name": "hostpath-provisioner", "annotations": native}, "spec": map[string]any{"storagePools": pools}}, nil},
		{map[string]any{"apiVersion": "ssp.kubevirt.io/v1beta3", "kind": "SSP",
			"metadata": map[string]any{"name": "ssp-kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged", "annotations": native}}, nil},
	}
	kinds := map[string]bool{}
	var out []*unstructured.Unstructured
	for _, c := range crs {
		cr := &unstructured.Unstructured{Object: c.cr}
		kinds[cr.GetKind()] = true
		r, err := e.Roles(cr.GetKind(), cr, graph.RoleInputs{Namespace: "kubevirt-hyperconverged", Images: map[string]string{"node": "n"}, Inputs: c.inputs})
		if err != nil || len(r.Refusals) > 0 {
			t.Fatalf("roles of %s: %v %v", cr.GetKind(), err, r.Refusals)
		}
		out = append(out, r.Objects...)
	}
	for _, k := range e.RoleKinds() {
		if !kinds[k] {
			t.Errorf("the roles of %s are not audited; add a CR of it to nodeRoles", k)
		}
	}
	return out
}

// rulesOf expands a ClusterRole's rules into grants; resourceNames,
// nonResourceURLs and wildcards, which no node role needs, fail t.
func rulesOf(t *testing.T, role *unstructured.Unstructured) []grant {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	var out []grant
	for _, r := range rules {
		rule := r.(map[string]any)
		if rule["resourceNames"] != nil || rule["nonResourceURLs"] != nil {
			t.Errorf("ClusterRole %s: rule %v: resourceNames or nonResourceURLs", role.GetName(), rule)
		}
		for _, g := range strs(rule["apiGroups"]) {
			for _, res := range strs(rule["resources"]) {
				for _, v := range strs(rule["verbs"]) {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("ClusterRole %s: wildcard in %v", role.GetName(), rule)
					}
					out = append(out, grant{g, res, v})
				}
			}
		}
	}
	return out
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		out = append(out, s.(string))
	}
	return out
}

func sortedGrants[V any](m map[grant]V) []grant {
	var out []grant
	for g := range m {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Compare(out[i].String(), out[j].String()) < 0 })
	return out
}
