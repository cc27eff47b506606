package synccontroller

import (
	"slices"
	"testing"

	"github.com/converge-dev/converge/api/v1alpha1"
)

func TestSecretNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec v1alpha1.SyncSpec
		want []string
	}{
		{"none", v1alpha1.SyncSpec{}, nil},
		{"source credentials", v1alpha1.SyncSpec{Source: v1alpha1.GitSource{SecretRef: &v1alpha1.LocalObjectReference{Name: "git-auth"}}}, []string{"git-auth"}},
		{"receiver token", v1alpha1.SyncSpec{Receiver: &v1alpha1.Receiver{SecretRef: v1alpha1.LocalObjectReference{Name: "hook"}}}, []string{"hook"}},
		{"all four", v1alpha1.SyncSpec{
			Source: v1alpha1.GitSource{SecretRef: &v1alpha1.LocalObjectReference{Name: "git-auth"},
				Verify: &v1alpha1.Verification{Mode: "HEAD", SecretRef: v1alpha1.LocalObjectReference{Name: "keys"}}},
			Target:   &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: "edge-1"}}},
			Receiver: &v1alpha1.Receiver{SecretRef: v1alpha1.LocalObjectReference{Name: "hook"}},
		}, []string{"git-auth", "keys", "edge-1", "hook"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := secretNames(&v1alpha1.Sync{Spec: tc.spec}); !slices.Equal(got, tc.want) {
				t.Errorf("secretNames = %v, want %v", got, tc.want)
			}
		})
	}
}
