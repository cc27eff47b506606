package synccontroller

import (
	"strings"
	"testing"

	"github.com/converge-dev/converge/api/v1alpha1"
)

func TestLockdownDenied(t *testing.T) {
	sync := func(url string, deps ...v1alpha1.SyncReference) *v1alpha1.Sync {
		s := &v1alpha1.Sync{Spec: v1alpha1.SyncSpec{Source: v1alpha1.GitSource{URL: url}, DependsOn: deps}}
		s.Namespace, s.Name = "team-a", "virt"
		return s
	}
	const remote = "https://git.example.com/platform/virt.git"
	for _, tc := range []struct {
		name     string
		lockdown Lockdown
		sync     *v1alpha1.Sync
		want     string // substring of the error; "" means allowed
	}{
		{"https allowed", Lockdown{}, sync(remote), ""},
		{"ssh allowed", Lockdown{}, sync("git@git.example.com:platform/virt.git"), ""},
		{"file URL refused", Lockdown{}, sync("file:///var/cache/converge/git"), `spec.source.url "file:///var/cache/converge/git": local paths and file:// URLs are refused`},
		{"absolute path refused", Lockdown{}, sync("/etc"), "--allow-local-sources"},
		{"relative path refused", Lockdown{}, sync("config"), "--allow-local-sources"},
		{"local allowed by flag", Lockdown{AllowLocalSources: true}, sync("file:///srv/git/virt"), ""},
		{"same-namespace dependency", Lockdown{NoCrossNamespaceRefs: true}, sync(remote, v1alpha1.SyncReference{Name: "base"}, v1alpha1.SyncReference{Namespace: "team-a", Name: "net"}), ""},
		{"cross-namespace dependency refused", Lockdown{NoCrossNamespaceRefs: true}, sync(remote, v1alpha1.SyncReference{Name: "base"}, v1alpha1.SyncReference{Namespace: "flux-system", Name: "infra"}),
			"spec.dependsOn[1]: Sync flux-system/infra is in another namespace than team-a"},
		{"cross-namespace dependency allowed without the flag", Lockdown{}, sync(remote, v1alpha1.SyncReference{Namespace: "flux-system", Name: "infra"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.lockdown.denied(tc.sync)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("denied: %v, want allowed", err)
			case tc.want != "" && err == nil:
				t.Fatalf("allowed, want an error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("denied: %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLockdownServiceAccount(t *testing.T) {
	remote := &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: "prod"}}}
	for _, tc := range []struct {
		name     string
		def      string
		spec     v1alpha1.SyncSpec
		wantUser string
	}{
		{"no default, no account: the controller's identity", "", v1alpha1.SyncSpec{}, ""},
		{"spec account wins", "tenant", v1alpha1.SyncSpec{ServiceAccountName: "deployer"}, "deployer"},
		{"default for the local cluster", "tenant", v1alpha1.SyncSpec{}, "tenant"},
		{"no default for a remote target (its kubeconfig's identity, as Flux)", "tenant", v1alpha1.SyncSpec{Target: remote}, ""},
		{"spec account on a remote target", "tenant", v1alpha1.SyncSpec{Target: remote, ServiceAccountName: "deployer"}, "deployer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Lockdown{DefaultServiceAccount: tc.def}.serviceAccount(&v1alpha1.Sync{Spec: tc.spec})
			if got != tc.wantUser {
				t.Fatalf("serviceAccount = %q, want %q", got, tc.wantUser)
			}
		})
	}
}
