package virtapi

import (
	"net/http"
	"sort"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// subresources are the served subresources of each resource with the verb
// their requests are authorized as: PUT is update, a GET (the console's
// WebSocket upgrade too) is get, as KubeVirt's RBAC grants them
// (pkg/virt-operator/resource/generate/rbac/cluster.go).
var subresources = map[string]map[string]string{
	"virtualmachines": {"start": "update", "stop": "update", "restart": "update"},
	"virtualmachineinstances": {"console": "get", "vnc": "get",
		"guestosinfo": "get", "userlist": "get", "filesystemlist": "get"},
}

// apiResources lists the served subresources as KubeVirt's virt-api lists
// them at /apis/subresources.kubevirt.io/v1 ("virtualmachines/start",
// namespaced), with their verb.
func apiResources() []metav1.APIResource {
	var out []metav1.APIResource
	for r, subs := range subresources {
		for sub, verb := range subs {
			out = append(out, metav1.APIResource{Name: r + "/" + sub, Namespaced: true, Verbs: metav1.Verbs{verb}})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// aggregatedResources is apiResources in the aggregated discovery format
// (apidiscovery.k8s.io/v2), which kube-apiserver asks aggregated servers
// for first: each resource with no verbs of its own (its objects are
// kubevirt.io's) and its subresources.
func aggregatedResources() []apidiscoveryv2.APIResourceDiscovery {
	var out []apidiscoveryv2.APIResourceDiscovery
	for r, subs := range subresources {
		d := apidiscoveryv2.APIResourceDiscovery{Resource: r, Scope: apidiscoveryv2.ScopeNamespace, Verbs: []string{}}
		for sub, verb := range subs {
			d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: sub, Verbs: []string{verb}})
		}
		sort.Slice(d.Subresources, func(i, j int) bool { return d.Subresources[i].Subresource < d.Subresources[j].Subresource })
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

// install serves discovery of the group (/apis, /apis/GROUP,
// /apis/GROUP/v1, plain and aggregated), the server's version
// (/apis/GROUP/v1/version, which virtctl reads) and the subresources
// (/apis/GROUP/v1/namespaces/...) on gs.
func (s *server) install(gs *genericapiserver.GenericAPIServer) {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: GroupVersion.String(), Version: GroupVersion.Version}
	group := metav1.APIGroup{Name: GroupVersion.Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
	gs.DiscoveryGroupManager.AddGroup(group)
	gs.AggregatedDiscoveryGroupManager.AddGroupVersion(GroupVersion.Group, apidiscoveryv2.APIVersionDiscovery{
		Version: GroupVersion.Version, Resources: aggregatedResources(), Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
	prefix := "/apis/" + GroupVersion.Group
	gs.Handler.NonGoRestfulMux.Handle(prefix, discovery.NewAPIGroupHandler(codecs, group))
	gs.Handler.NonGoRestfulMux.Handle(prefix+"/"+GroupVersion.Version,
		discovery.NewAPIVersionHandler(codecs, GroupVersion, discovery.APIResourceListerFunc(apiResources)))
	gs.Handler.NonGoRestfulMux.Handle(prefix+"/"+GroupVersion.Version+"/version", http.HandlerFunc(s.version))
	gs.Handler.NonGoRestfulMux.HandlePrefix(prefix+"/"+GroupVersion.Version+"/", http.HandlerFunc(s.serve))
}
