package virtapi

import (
	"encoding/json"
	"net/http"
	"runtime"

	"kubevirt.io/client-go/version"
)

// KubeVirtAPIVersion is the version of kubevirt.io/api in go.mod: the
// KubeVirt API level converge serves (TestKubeVirtAPIVersion keeps the
// two equal).
const KubeVirtAPIVersion = "v1.9.0"

// serverVersion gives what GET /apis/subresources.kubevirt.io/v1/version
// answers, KubeVirt's version.Info (pkg/virt-api/api.go, virtversion.Get):
// gitVersion is KubeVirtAPIVersion, which virtctl compares with its own
// major.minor; the Go fields are this binary's.
func serverVersion() version.Info {
	return version.Info{GitVersion: KubeVirtAPIVersion, GitTreeState: "clean", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// version answers GET .../version (authorized as get on the resource
// version of subresources.kubevirt.io, which kubevirt.io:default grants
// every authenticated user).
func (s *server) version(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "expected GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(serverVersion())
}
