package reconciler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/converge-dev/converge/reconciler"
)

// TestApplyBatches applies, in the HC's stage, 3 ConfigMaps, 2
// Deployments and a Pod through a client that records when each apply
// starts and ends, on a real API server. The ConfigMaps' applies are held
// until a Deployment's apply has started (10 s at most): a Deployment is
// not behind a barrier after the objects others name, it goes in their
// batch (its pods mount them later). The Pod, whose admission may look
// them up, starts only after every ConfigMap's apply ended.
func TestApplyBatches(t *testing.T) {
	c, err := client.NewWithWatch(startEnv(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ start, end time.Time }
	var mu sync.Mutex
	spans := map[string]*span{}
	deploymentStarted := make(chan struct{})
	var once sync.Once
	held := 0
	wrapped := interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			name := obj.GetObjectKind().GroupVersionKind().Kind + "/" + obj.GetName()
			mine := obj.GetNamespace() == hcNS && strings.HasPrefix(obj.GetName(), "batch-")
			if mine {
				mu.Lock()
				spans[name] = &span{start: time.Now()}
				mu.Unlock()
				switch obj.GetObjectKind().GroupVersionKind().Kind {
				case "Deployment":
					once.Do(func() { close(deploymentStarted) })
				case "ConfigMap":
					select {
					case <-deploymentStarted:
					case <-time.After(10 * time.Second):
						mu.Lock()
						held++
						mu.Unlock()
					}
				}
			}
			err := cl.Patch(ctx, obj, patch, opts...)
			if mine {
				mu.Lock()
				spans[name].end = time.Now()
				mu.Unlock()
			}
			return err
		},
	})
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "batch-pod", "namespace": hcNS},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.local/app:1"}}},
	}}
	objs := []*unstructured.Unstructured{pod, deploymentObj(t, "batch-web-1"), deploymentObj(t, "batch-web-2")}
	for _, n := range []string{"batch-cm-1", "batch-cm-2", "batch-cm-3"} {
		objs = append(objs, configMap(n, map[string]string{"k": n}))
	}
	o := testOptions(false)
	o.Wait = false
	p := reconciler.NewPipeline(wrapped, nil, o)
	doSync(t, p, withObjects(renderExample(t, nil, nil), objs...))

	if held != 0 {
		t.Errorf("%d ConfigMap applies waited 10 s for a Deployment's: the Deployments were applied after a barrier", held)
	}
	if len(spans) != len(objs) {
		t.Fatalf("recorded %d applies, want %d: %v", len(spans), len(objs), spans)
	}
	podStart := spans["Pod/batch-pod"].start
	for name, s := range spans {
		if strings.HasPrefix(name, "ConfigMap/") && !s.end.Before(podStart) {
			t.Errorf("Pod applied at %s, before %s's apply ended at %s", podStart.Format(time.StampMicro), name, s.end.Format(time.StampMicro))
		}
	}
}
