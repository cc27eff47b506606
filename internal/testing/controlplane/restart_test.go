package controlplane_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// TestKillRestart kills each process of a restartable control plane with
// SIGKILL and restarts it: what was written before is still there, the
// same client (same address, same certificates) reads and writes again,
// and a killed process is gone (the API server stops answering while it
// is down).
func TestKillRestart(t *testing.T) {
	controlplane.RequireForTest(t)
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) {
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	env, err := controlplane.StartRestartable()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, p := range []controlplane.Process{controlplane.Etcd, controlplane.APIServer, controlplane.Etcd} {
		t.Run(string(p), func(t *testing.T) {
			name := "before-kill-" + string(rune('a'+i))
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
				Data: map[string]string{"k": "v"}}); err != nil {
				t.Fatal(err)
			}
			if err := env.Kill(p); err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := c.Get(short, types.NamespacedName{Namespace: "default", Name: name}, &corev1.ConfigMap{})
			cancel()
			if err == nil {
				t.Errorf("a read succeeded with %s killed", p)
			}
			start := time.Now()
			if err := env.Restart(p, time.Minute); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s restarted, API server ready after %s", p, time.Since(start).Round(time.Millisecond))
			cm := &corev1.ConfigMap{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, cm); err != nil || cm.Data["k"] != "v" {
				t.Errorf("ConfigMap written before the kill: %v, data %v", err, cm.Data)
			}
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-" + name}}); err != nil {
				t.Errorf("write after the restart: %v", err)
			}
		})
	}
}
